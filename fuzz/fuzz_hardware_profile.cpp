// Fuzz target: a hardware profile (simulator::hardware_from_json), "base" overlays included: a
// base names a built-in profile, read from the data directory as any profile is.
#include "fuzz_json.hpp"
#include "simulator/hardware_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return shardplan::fuzz::run_json_reader(data, size, [](const nlohmann::json& j) {
    (void)shardplan::simulator::hardware_from_json(j, "fuzz-profile.json");
  });
}
