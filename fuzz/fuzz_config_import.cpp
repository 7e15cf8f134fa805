// Fuzz target: a DeepSpeed ds_config and SageMaker model-parallel parameters (planner's imports),
// on a 16-device, 8-per-node cluster with the context's defaults.
#include "fuzz_json.hpp"
#include "interop/config_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(data, size, [](const nlohmann::json& j) {
    shardplan::interop::ImportContext ctx;
    ctx.devices = 16;
    ctx.devices_per_node = 8;
    try {
      (void)shardplan::interop::import_deepspeed(j, ctx, "fuzz-ds_config.json");
    } catch (const shardplan::simulator::InputError&) {}
    (void)shardplan::interop::import_smp(j, ctx, "fuzz-smp.json");
  });
}
