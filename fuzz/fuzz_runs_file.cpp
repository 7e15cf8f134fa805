// Fuzz target: a measured-runs file (calibration::runs_from_json, schema shardplan.runs/1).
#include "calibration/runs_file.hpp"
#include "fuzz_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(
      data, size, [](const nlohmann::json& j) { (void)shardplan::calibration::runs_from_json(j, "fuzz-runs.json"); });
}
