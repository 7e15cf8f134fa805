// FP8 linears (ParallelConfig::fp8): refused where the device has no FP8 tensor cores or the run
// is fp32; the block GEMMs faster but never beyond the peak ratio; model FLOPs unchanged; the FP8
// weight copies, FP8-held weights (fp8_param_gather) and FP8-stored linear inputs against their
// closed forms; FP8 parameter gathers move fewer bytes; profiles and configs round-trip.
#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <string>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace fp8_test {  // named, not anonymous: the files share a unity-build unit

using testing::refusal;

using testing::cluster;
using testing::config;
using testing::linear_weights;
using testing::run;

TEST(Fp8, RefusedWithoutFp8TensorCoresOrInFp32) {
  const ModelSpec m = load_model("llama2-7b");
  ParallelConfig cfg = config(cluster("p4d.24xlarge", 1), 1, 1, 1, 1, 8, 2048);
  cfg.fp8 = Fp8Recipe::delayed;
  const std::string a100 = refusal(m, cluster("p4d.24xlarge", 1), cfg);
  EXPECT_NE(a100.find("--fp8"), std::string::npos) << a100;
  EXPECT_NE(a100.find("no FP8 tensor cores"), std::string::npos) << a100;
  EXPECT_NE(refusal(m, cluster("g5.48xlarge", 1), cfg).find("--fp8"), std::string::npos);
  EXPECT_EQ(refusal(m, cluster("p5.48xlarge", 1), cfg), "");
  EXPECT_EQ(refusal(m, cluster("gaudi2-hls2", 1), cfg), "");
  cfg.precision = Precision::fp32;
  EXPECT_NE(refusal(m, cluster("p5.48xlarge", 1), cfg).find("--precision bf16 or fp16"), std::string::npos);
}

TEST(Fp8, ParamGatherNeedsFp8AndZero) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 8, 2048);
  cfg.fp8_param_gather = true;
  EXPECT_NE(refusal(m, c, cfg).find("--fp8-param-gather: expected --fp8"), std::string::npos);
  cfg.fp8 = Fp8Recipe::tensorwise;
  cfg.zero_stage = 0;
  EXPECT_NE(refusal(m, c, cfg).find("--zero 1, 2 or 3"), std::string::npos);
  cfg.zero_stage = 3;
  EXPECT_EQ(refusal(m, c, cfg), "");
}

// llama2-70b on p5 nodes (tp 8 on one node by default): compute-bound linears.
struct Pair {
  Prediction bf16, fp8;
};
Pair pair(Fp8Recipe recipe, int zero = 1, bool param_gather = false, int nodes = 1, int tp = 8) {
  const ModelSpec m = load_model("llama2-70b");
  const ClusterSpec c = cluster("p5.48xlarge", nodes);
  ParallelConfig cfg = config(c, tp, 1, zero, 1, 8 * nodes / tp, 4096);
  cfg.recompute = Recompute::full;
  Pair p;
  p.bf16 = run(m, c, cfg);
  cfg.fp8 = recipe;
  cfg.fp8_param_gather = param_gather;
  p.fp8 = run(m, c, cfg);
  return p;
}

TEST(Fp8, FasterComputeWithinThePeakRatioAndTheSameModelFlops) {
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::blockwise}) {
    const Pair p = pair(r);
    const double bf16 = p.bf16.time.forward_compute_s + p.bf16.time.backward_compute_s;
    const double fp8 = p.fp8.time.forward_compute_s + p.fp8.time.backward_compute_s;
    EXPECT_LT(fp8, bf16) << to_string(r);        // the linears are most of a 70B block's FLOPs
    EXPECT_GT(fp8, 0.5 * bf16) << to_string(r);  // the FP8 peak is twice the bf16 one
    EXPECT_DOUBLE_EQ(p.fp8.model_flops_per_step, p.bf16.model_flops_per_step);
    EXPECT_LT(p.fp8.time.step_s, p.bf16.time.step_s);
  }
  // Current scaling reads every cast tensor once more for its amax.
  const Pair delayed = pair(Fp8Recipe::delayed), tensorwise = pair(Fp8Recipe::tensorwise);
  EXPECT_GT(tensorwise.fp8.time.forward_compute_s, delayed.fp8.time.forward_compute_s);
}

// MFU stays against the 16-bit peak; the fraction of the FP8 peak the GEMMs run at is half of it
// on the H100 (FP8 peak = 2 x bf16) and below 1; without FP8 the two are the same figure.
TEST(Fp8, MfuAgainstTheSixteenBitPeakAndTheGemmPrecisionsFraction) {
  const Pair p = pair(Fp8Recipe::delayed);
  EXPECT_NEAR(p.fp8.gemm_peak_fraction, p.fp8.mfu / 2, 1e-3 * p.fp8.mfu);
  EXPECT_LT(p.fp8.gemm_peak_fraction, 1.0);
  EXPECT_GT(p.fp8.mfu, p.bf16.mfu);  // the same model FLOPs in less time, over the same peak
  EXPECT_DOUBLE_EQ(p.bf16.gemm_peak_fraction, p.bf16.mfu);
  EXPECT_LT(p.bf16.mfu, 1.0);
}

TEST(Fp8, WeightCopiesAgainstTheClosedForm) {
  const ModelSpec m = load_model("llama2-70b");
  const double W = m.num_layers * linear_weights(m, 8);
  // ZeRO-1: an FP8 copy and its FP8 transpose beside each 16-bit weight: 2 bytes per weight.
  const Pair cached = pair(Fp8Recipe::delayed, 1);
  EXPECT_NEAR(cached.fp8.worst.parameters - cached.bf16.worst.parameters, 2 * W, 1e-6 * W);
  // fp8_param_gather: the weight is FP8 (1 byte, not 2) plus its transpose: as much as bf16.
  const Pair held = pair(Fp8Recipe::delayed, 1, true);
  EXPECT_NEAR(held.fp8.worst.parameters, held.bf16.worst.parameters, 1e-6 * W);
  // ZeRO-3 over 16 ranks (2 nodes, tp 1): FP8-held shards save 1 byte per weight / 16; no cached
  // copies (each gathered unit is quantised as it runs).
  const double W1 = m.num_layers * linear_weights(m, 1);
  const Pair z3 = pair(Fp8Recipe::delayed, 3, false, 2, 1);
  EXPECT_NEAR(z3.fp8.worst.parameters, z3.bf16.worst.parameters, 1e-6 * W1);
  const Pair z3held = pair(Fp8Recipe::delayed, 3, true, 2, 1);
  EXPECT_NEAR(z3held.bf16.worst.parameters - z3held.fp8.worst.parameters, W1 / 16, 1e-6 * W1);
  // ... and its gathers move fewer bytes.
  EXPECT_LT(z3held.fp8.time.dp_total_comm_s, z3held.bf16.time.dp_total_comm_s);
  EXPECT_DOUBLE_EQ(z3.fp8.time.dp_total_comm_s, z3.bf16.time.dp_total_comm_s);
}

// Stored activations with no recompute: the qkv, MLP-up and MLP-down inputs kept as FP8 copies
// (1 byte, not 2); the output projection keeps an FP8 copy beside flash attention's 16-bit O.
TEST(Fp8, StoredLinearInputsAgainstTheClosedForm) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const int tp = 2, seq = 4096;
  ParallelConfig cfg = config(c, tp, 1, 1, 1, 4, seq);
  cfg.sequence_parallel = true;
  const Prediction bf16 = run(m, c, cfg);
  cfg.fp8 = Fp8Recipe::delayed;
  const Prediction fp8 = run(m, c, cfg);
  const double M = seq, h = m.hidden, f = m.ffn_hidden, e = 2;
  const double per_block = (e - 1) * M * (h / tp + h / tp + f / tp) - M * m.q_dim() / tp;
  EXPECT_NEAR(bf16.worst.activations - fp8.worst.activations, m.num_layers * per_block, 1e-6 * bf16.worst.activations);
  EXPECT_LT(fp8.worst.activations, bf16.worst.activations);
  // Full recompute keeps only each block's input: FP8 changes nothing there.
  cfg.recompute = Recompute::full;
  const Prediction full8 = run(m, c, cfg);
  cfg.fp8 = Fp8Recipe::none;
  EXPECT_DOUBLE_EQ(run(m, c, cfg).worst.activations, full8.worst.activations);
}

TEST(Fp8, ProfilesAndConfigsRoundTrip) {
  const HardwareProfile p5 = load_hardware("p5.48xlarge");
  EXPECT_TRUE(p5.device.has_fp8());
  EXPECT_FALSE(load_hardware("p4d.24xlarge").device.has_fp8());
  EXPECT_FALSE(p5.device.gemm_efficiency_fp8.log10_x.empty());
  const HardwareProfile back = hardware_from_json(to_json(p5), "round trip");
  EXPECT_DOUBLE_EQ(back.device.peak_fp8_flops, p5.device.peak_fp8_flops);
  EXPECT_DOUBLE_EQ(back.device.fp8_gemm_curve().at(1e11), p5.device.fp8_gemm_curve().at(1e11));
  // Gaudi2 publishes no FP8 GEMM curve: its 16-bit one at the FP8 peak.
  const HardwareProfile g2 = load_hardware("gaudi2-hls2");
  EXPECT_DOUBLE_EQ(g2.device.fp8_gemm_curve().at(1e11), g2.device.gemm_curve(Precision::bf16).at(1e11));

  ParallelConfig cfg;
  cfg.fp8 = Fp8Recipe::blockwise;
  cfg.fp8_param_gather = true;
  const ParallelConfig again = config_from_json(to_json(cfg), "round trip");
  EXPECT_EQ(again.fp8, Fp8Recipe::blockwise);
  EXPECT_TRUE(again.fp8_param_gather);
  nlohmann::json old = to_json(cfg);
  old.erase("fp8");
  old.erase("fp8_param_gather");
  EXPECT_EQ(config_from_json(old, "old plan").fp8, Fp8Recipe::none);  // plans from before FP8
  old["fp8"] = "e4m3";
  EXPECT_THROW(config_from_json(old, "bad plan"), InputError);
}

}  // namespace fp8_test
}  // namespace shardplan::simulator
