// A CPU BLAS packs its operands between the FMA loops, so the bytes a GEMM streams add to its
// compute time there (simulator/efficiency_fit.hpp: fit_gemm_stream; layer_cost.cpp: gemm_time_s
// with a profile's gemm_operand_stream_bytes_per_s); without the field (every GPU profile) a
// GEMM takes the longer of the two, as before.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "simulator/efficiency_fit.hpp"
#include "simulator/errors.hpp"
#include "simulator/layer_cost.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace gemm_stream_test {  // named, not anonymous: the files share a unity-build unit

// The profile's shapes: LM heads (k 1024, a 96 MB weight, m 32..512) and the cube grid, with
// a rank's cache share of 16 MiB: the heads' weights (and at 512 tokens the output) stream.
std::vector<GemmSample> timings(double rate, double stream_Bps, double noise) {
  std::vector<std::array<double, 3>> shapes;
  for (double m : {32.0, 128.0, 512.0}) shapes.push_back({m, 1024.0, 24576.0});
  for (double m : {64.0, 256.0, 1024.0})
    for (double n : {64.0, 256.0, 1024.0})
      for (double k : {64.0, 256.0, 1024.0}) shapes.push_back({m, k, n});
  std::vector<GemmSample> out;
  int i = 0;
  for (const auto& [m, k, n] : shapes) {
    const double flops = 2 * m * k * n,
                 streamed = streamed_operand_bytes({4 * m * k, 4 * k * n, 4 * m * n}, 16 * 1048576.0);
    const double t = flops / rate + (stream_Bps > 0 ? streamed / stream_Bps : 0.0);
    out.push_back({flops, streamed, t * (1 + noise * std::sin(1.7 * ++i))});  // +-noise, no pattern in size
  }
  return out;
}

TEST(GemmStreamFit, OnlyOperandsLargerThanTheCacheShareStream) {
  EXPECT_EQ(streamed_operand_bytes({1e6, 100e6, 20e6}, 16e6), 120e6);
  EXPECT_EQ(streamed_operand_bytes({1e6, 4e6, 4e6}, 16e6), 0.0);
  EXPECT_EQ(streamed_operand_bytes({1e6, 4e6, 4e6}, 0), 9e6);  // no cache figure: every operand
}

TEST(GemmStreamFit, RecoversTheFmaRateAndTheOperandStream) {
  const GemmStreamFit exact = fit_gemm_stream(timings(120e9, 13e9, 0.0));
  EXPECT_NEAR(exact.flop_rate, 120e9, 1e6);
  EXPECT_NEAR(exact.stream_Bps, 13e9, 1e5);
  const GemmStreamFit noisy = fit_gemm_stream(timings(120e9, 13e9, 0.03));
  EXPECT_NEAR(noisy.flop_rate / 120e9, 1.0, 0.05);
  EXPECT_NEAR(noisy.stream_Bps / 13e9, 1.0, 0.15);
  EXPECT_GT(noisy.rms_relative_error, 0.0);
  EXPECT_THROW(fit_gemm_stream({timings(120e9, 13e9, 0).front()}), InputError);
}

TEST(GemmStreamFit, TimingsThatScaleWithFlopAloneFitNoStream) {
  const std::vector<GemmSample> s = timings(120e9, 0, 0.03);
  const GemmStreamFit f = fit_gemm_stream(s);
  EXPECT_NEAR(f.flop_rate / 120e9, 1.0, 0.05);
  if (f.stream_Bps > 0)  // any stream term left is noise: a sliver of every sample
    for (const auto& g : s) EXPECT_LT(g.streamed_bytes / f.stream_Bps, 0.05 * g.seconds);
}

double gemm_s(const ClusterSpec& c, double m, double k, double n) {
  const ModelSpec model = load_model("gpt2");
  ParallelConfig cfg = testing::config(c, 1, 1, 0, 1, 1, 128);
  cfg.precision = Precision::fp32;
  const std::vector<LinearDesc> linears = model.block_linears();
  const std::vector<char> mask(linears.size(), 0);
  const CostEnv env = make_cost_env(model, c, cfg, linears, mask, BlockGroups{GroupPlacement{1, 1, 1}, {}, {}, {}});
  return gemm_time_s(env, m, k, n);
}

TEST(GemmStream, StreamedOperandsAddToACpuGemmAndNothingChangesWithoutTheField) {
  ClusterSpec plain = testing::cluster("local-cpu-2core", 1);
  plain.devices_per_node = 1;
  plain.hardware.device.last_level_cache_bytes = 32e6;
  ClusterSpec streamed = plain;
  streamed.hardware.device.gemm_operand_stream_Bps = 10e9;
  // GPT-2's LM head at 128 tokens: its 154 MB weight streams (the 26 MB logits fit 32 MB), 15 ms
  // at 10 GB/s on top of the FMAs.
  const double m = 128, k = 768, n = 50257;
  EXPECT_NEAR(gemm_s(streamed, m, k, n) - gemm_s(plain, m, k, n), 4 * k * n / 10e9, 1e-9);
  // The same FLOP as a cube keeps its 11 MB operands in the cache share: no change.
  const double cube = std::cbrt(m * k * n);
  EXPECT_DOUBLE_EQ(gemm_s(streamed, cube, cube, cube), gemm_s(plain, cube, cube, cube));
  // Two ranks on the node halve the share: the logits (26 MB > 16 MB) stream too.
  ClusterSpec two = streamed;
  two.devices_per_node = 2;
  ClusterSpec two_plain = plain;
  two_plain.devices_per_node = 2;
  EXPECT_NEAR(gemm_s(two, m, k, n) - gemm_s(two_plain, m, k, n), 4 * (k * n + m * n) / 10e9, 1e-9);
  // Shipped GPU profiles have no field: their GEMMs stay on the roofline.
  EXPECT_EQ(testing::cluster("p4de.24xlarge", 1).hardware.device.gemm_operand_stream_Bps, 0.0);
}

TEST(GemmStream, TheFieldParsesRoundTripsAndABadValueNamesIt) {
  ClusterSpec c = testing::cluster("local-cpu-2core", 1);
  c.hardware.device.gemm_operand_stream_Bps = 13e9;
  const nlohmann::json j = to_json(c.hardware);
  EXPECT_EQ(j["device"]["gemm_operand_stream_bytes_per_s"], 13e9);
  EXPECT_EQ(hardware_from_json(j, "cpu.json").device.gemm_operand_stream_Bps, 13e9);
  nlohmann::json bad = j;
  bad["device"]["gemm_operand_stream_bytes_per_s"] = -1;
  try {
    (void)hardware_from_json(bad, "cpu.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_operand_stream_bytes_per_s"), std::string::npos) << e.what();
  }
}

}  // namespace gemm_stream_test
}  // namespace shardplan::simulator
