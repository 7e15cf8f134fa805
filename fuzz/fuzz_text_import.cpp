// Fuzz target: the text formats other stacks write, as shardplan reads them — launch scripts and
// configs (Megatron-LM arguments, a torchtitan TOML, an Accelerate YAML, a NeuronX Distributed
// launch, an Optimum-Habana command) and training logs (the six `runs import` formats). The first
// byte picks the reader, the rest is the text. On a 16-device, 8-per-node cluster. A user-facing
// InputError is the expected end of bad input; anything else that escapes is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "interop/accelerate.hpp"
#include "interop/config_import.hpp"
#include "interop/habana.hpp"
#include "interop/neuron.hpp"
#include "interop/torchtitan.hpp"
#include "interop/training_log.hpp"
#include "simulator/errors.hpp"

namespace {

namespace io = shardplan::interop;

void read(uint8_t selector, std::string_view text) {
  io::ImportContext ctx;
  ctx.devices = 16;
  ctx.devices_per_node = 8;
  switch (selector % 11) {
    case 0:
      (void)io::import_megatron(text, ctx, "fuzz-megatron.sh");
      break;
    case 1:
      (void)io::import_torchtitan(text, ctx, "fuzz-torchtitan.toml");
      break;
    case 2:
      (void)io::import_accelerate(text, ctx, "fuzz-accelerate.yaml");
      break;
    case 3:
      (void)io::import_neuron(text, ctx, "fuzz-neuron.sh");
      break;
    case 4:
      (void)io::import_habana(text, nlohmann::json(), ctx, "fuzz-habana.sh");
      break;
    default: {
      const auto format = static_cast<io::LogFormat>(selector % 11 - 5);
      std::istringstream in{std::string(text)};
      const io::TrainingLog log = io::parse_training_log(in, format, "fuzz.log");
      (void)io::measured_figure(log);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    read(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } catch (const shardplan::simulator::InputError&) {}
  return 0;
}
