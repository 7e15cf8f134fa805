// shardplan: plan distributed LLM training before renting the cluster.
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"

int main(int argc, char** argv) {
  CLI::App app{"shardplan: predict memory and step time of distributed LLM training configurations"};
  app.set_version_flag("--version", shardplan::simulator::version());
  app.require_subcommand(1);
  std::map<std::string, shardplan::cli::Run> runs;
  runs["plan"] = shardplan::cli::add_plan_command(app);
  runs["simulate"] = shardplan::cli::add_simulate_command(app);
  runs["explain"] = shardplan::cli::add_explain_command(app);
  runs["export"] = shardplan::cli::add_export_command(app);
  runs["models"] = shardplan::cli::add_models_command(app);
  runs["hardware"] = shardplan::cli::add_hardware_command(app);
  runs["validate"] = shardplan::cli::add_validate_command(app);
  runs["calibrate"] = shardplan::cli::add_calibrate_command(app);
  runs["runs"] = shardplan::cli::add_runs_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) { return app.exit(e); } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) { return app.exit(e); } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "shardplan: error: %s\n", e.what());
    return 2;
  }
  try {
    for (const auto* sub : app.get_subcommands()) return runs.at(sub->get_name())();
  } catch (const shardplan::simulator::InputError& e) {
    std::fprintf(stderr, "shardplan: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardplan: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
