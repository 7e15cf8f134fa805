// Fuzz target: a model card or a Hugging Face config.json (simulator::model_from_json), then the
// shapes everything else derives from it (parameter counts, the block's linears).
#include "fuzz_json.hpp"
#include "simulator/model_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(data, size, [](const nlohmann::json& j) {
    const auto m = shardplan::simulator::model_from_json(j, "fuzz-model.json");
    (void)shardplan::simulator::count_parameters(m);
    (void)m.block_linears();
  });
}
