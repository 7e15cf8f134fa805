// A profile's "fitted" section (terms fitted to measured runs): applied once at load on top of
// the curves, kept through to_json / hardware_from_json (plans embed resolved profiles) and
// through "base" overlays and per-run overrides, never applied twice; the peaks stay the
// datasheet's. The shipped GPU profiles carry one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::simulator {
namespace fitted_profile_test {  // named, not anonymous: the files share a unity-build unit

using nlohmann::json;
using shardplan::testing::TempDir;

json raw_profile(const std::string& name) {
  return read_json_file(data_dir() + "/hardware_profiles/" + name + ".json");
}

// `name` as its file says, without the fitted section.
HardwareProfile unfitted(const std::string& name, const TempDir& dir) {
  json j = raw_profile(name);
  j.erase("fitted");
  j.erase("base");
  j["sources"].erase("fitted.compute_efficiency_scale");
  j["sources"].erase("fitted.fp8_compute_efficiency_scale");
  return load_hardware_file(dir.write_json(name + "-unfitted.json", j));
}

TEST(FittedProfile, ShippedGpuProfilesCarryAFitWithItsSource) {
  for (const char* n : {"p4d.24xlarge", "p5.48xlarge"}) {
    const json j = raw_profile(n);
    ASSERT_TRUE(j.contains("fitted")) << n;
    const HardwareProfile hw = load_hardware(n);
    EXPECT_TRUE(hw.fitted.present);
    EXPECT_NE(hw.fitted.source.find("published"), std::string::npos) << hw.fitted.source;
    EXPECT_NE(hw.fitted.source.find("eave-one-source-out"), std::string::npos) << hw.fitted.source;
  }
  // p4de.24xlarge overlays p4d.24xlarge: it inherits the fit.
  EXPECT_DOUBLE_EQ(load_hardware("p4de.24xlarge").fitted.compute_efficiency_scale,
                   load_hardware("p4d.24xlarge").fitted.compute_efficiency_scale);
}

TEST(FittedProfile, AppliedOnceToTheCurvesNotThePeaks) {
  TempDir dir;
  const HardwareProfile fitted = load_hardware("p5.48xlarge");
  const HardwareProfile plain = unfitted("p5.48xlarge", dir);
  const double k = fitted.fitted.compute_efficiency_scale;
  ASSERT_NE(k, 1.0);
  EXPECT_DOUBLE_EQ(fitted.device.peak(Precision::bf16), plain.device.peak(Precision::bf16));
  for (double x : {1e8, 1e10, 1e12})
    EXPECT_NEAR(fitted.device.gemm_efficiency.at(x), k * plain.device.gemm_efficiency.at(x), 1e-12) << x;
  if (!plain.device.flash_attention.empty()) {
    EXPECT_NEAR(fitted.device.flash_attention.at(true, 128, 4096, false),
                k * plain.device.flash_attention.at(true, 128, 4096, false), 1e-12);
  }
  EXPECT_DOUBLE_EQ(fitted.device.memory_efficiency.at(1e8), plain.device.memory_efficiency.at(1e8));
  // The FP8 GEMM curve moves with its own term only (the 16-bit fit says nothing about TE's FP8 GEMMs).
  const double k8 = fitted.fitted.fp8_compute_efficiency_scale;
  ASSERT_NE(k8, k);
  for (double x : {1e9, 1e11, 1e12})
    EXPECT_NEAR(fitted.device.gemm_efficiency_fp8.at(x), k8 * plain.device.gemm_efficiency_fp8.at(x), 1e-12) << x;
  // Resolved and read back (as a plan embeds it): the same curves, not scaled a second time.
  const HardwareProfile back = hardware_from_json(to_json(fitted), "plan.json");
  EXPECT_TRUE(back.fitted.present);
  EXPECT_NEAR(back.device.gemm_efficiency.at(1e11), fitted.device.gemm_efficiency.at(1e11), 1e-15);
  EXPECT_NEAR(back.device.gemm_efficiency_fp8.at(1e11), fitted.device.gemm_efficiency_fp8.at(1e11), 1e-15);
  EXPECT_DOUBLE_EQ(back.fitted.fp8_compute_efficiency_scale, k8);
  // Per-run overrides re-read the file: still applied once.
  const HardwareProfile over =
      load_hardware_with_overrides("p5.48xlarge", {{"network", {{"bandwidth_Gbps", 1600}}}}, "runs.json");
  EXPECT_NEAR(over.device.gemm_efficiency.at(1e11), fitted.device.gemm_efficiency.at(1e11), 1e-15);
}

TEST(FittedProfile, SlowsThePredictionByTheFittedFactor) {
  TempDir dir;
  ModelSpec m = load_model("llama2-7b");
  ParallelConfig cfg;
  cfg.dp = 8;
  cfg.zero_stage = 3;
  cfg.micro_batch_size = 2;
  cfg.global_batch_size = 16;
  cfg.seq_len = 4096;
  ParallelConfig cfg2 = cfg;
  const Prediction a = simulate(m, ClusterSpec{load_hardware("p5.48xlarge"), 1, 0}, cfg);
  const Prediction b = simulate(m, ClusterSpec{unfitted("p5.48xlarge", dir), 1, 0}, cfg2);
  EXPECT_GT(a.time.step_s, b.time.step_s);
  EXPECT_LT(a.mfu, b.mfu);  // same peak, longer step
}

TEST(FittedProfile, BadFittedSectionsNameTheField) {
  TempDir dir;
  json j = raw_profile("p5.48xlarge");
  j["fitted"]["compute_efficiency_scale"] = 0;
  try {
    load_hardware_file(dir.write_json("bad.json", j));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fitted.compute_efficiency_scale"), std::string::npos) << e.what();
  }
  j = raw_profile("p5.48xlarge");
  j["fitted"].erase("source");
  EXPECT_THROW(load_hardware_file(dir.write_json("nosource.json", j)), InputError);
}

}  // namespace fitted_profile_test
}  // namespace shardplan::simulator
