// Fuzz target: a plan.json (planner::plan_from_json: model, cluster, config, validated once).
#include "fuzz_json.hpp"
#include "planner/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(data, size, [](const nlohmann::json& j) {
    (void)shardplan::planner::plan_from_json(j, "fuzz-plan.json");
  });
}
