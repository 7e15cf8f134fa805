// Fuzz target: a plan.json (formats::plan_from_json: model, cluster, config, validated once).
#include "formats/plan.hpp"
#include "fuzz_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(
      data, size, [](const nlohmann::json& j) { (void)shardplan::formats::plan_from_json(j, "fuzz-plan.json"); });
}
