// Fuzz target: the argument vector of `shardplan simulate` (cli/), one argument per line
// of the input, parsed by CLI11 and run as the binary runs it: options checked, model card and
// hardware profile loaded, the configuration validated, simulated and printed (into a stream
// that discards it). Bad arguments must end in a CLI11 parse error or an InputError (exit 2);
// an escaping std::exception is what the binary reports as "internal error" (exit 3): a finding.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "simulator/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool silenced = [] {  // the report goes nowhere; errors are what is checked
    std::cout.rdbuf(nullptr);
    std::cerr.rdbuf(nullptr);
    return true;
  }();
  (void)silenced;
  std::vector<std::string> args{"shardplan", "simulate"};
  std::string arg;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg.push_back(c);
    }
  }
  if (!arg.empty()) args.push_back(arg);
  if (args.size() > 64) return 0;  // CLI11 parses argv linearly; long vectors add nothing
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  CLI::App app{"shardplan"};
  app.require_subcommand(1);
  const shardplan::cli::Run run = shardplan::cli::add_simulate_command(app);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    (void)run();
  } catch (const CLI::Error&) {
  } catch (const shardplan::simulator::InputError&) {}
  return 0;
}
