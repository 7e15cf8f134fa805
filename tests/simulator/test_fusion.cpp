// Fusion kinds (ParallelConfig::fusion): Megatron-Core's fused q/k/v and gate/up GEMMs and fused
// SwiGLU against eager layers. Memory against the closed form (the fused SwiGLU keeps the fc1
// output and the product, eager also silu(gate)); time: a fused projection runs as one wider
// GEMM, never slower; models with nothing to fuse predict the same; plan.json round trip.
#include <gtest/gtest.h>

#include "simulator/errors.hpp"
#include "simulator/layer_cost.hpp"
#include "simulator/prediction_json.hpp"
#include "support/block_env.hpp"
#include "support/config_round_trip.hpp"

namespace shardplan::simulator {
namespace fusion_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

double block_bytes(const ModelSpec& m, Fusion f, int tp) {
  ParallelConfig cfg;
  cfg.tp = tp;
  cfg.seq_len = 4096;
  cfg.micro_batch_size = 2;
  cfg.fusion = f;
  return testing::BlockEnv(m, "p5.48xlarge").bytes(cfg);
}

TEST(Fusion, FusedSwigluKeepsOneFfnTensorLessPerBlock) {
  const ModelSpec m = load_model("llama2-7b");
  const double M = 4096.0 * 2, e = 2.0;
  for (int tp : {1, 4})
    EXPECT_DOUBLE_EQ(block_bytes(m, Fusion::eager, tp) - block_bytes(m, Fusion::megatron, tp),
                     e * M * m.ffn_hidden / tp)
        << "tp " << tp;
  const ModelSpec gpt = load_model("gpt2");  // GELU: the same tensors either way
  EXPECT_DOUBLE_EQ(block_bytes(gpt, Fusion::eager, 1), block_bytes(gpt, Fusion::megatron, 1));
}

// torch.compile: SwiGLU as one kernel (the same tensors kept as Megatron's fused SwiGLU), the
// projections as eager's separate GEMMs: faster than eager by the activation's two memory passes
// only, slower than Megatron's wider GEMMs.
TEST(Fusion, CompileFusesThePointwiseOpsAndKeepsTheProjectionsApart) {
  const ModelSpec m = load_model("llama2-7b");
  for (int tp : {1, 4})
    EXPECT_DOUBLE_EQ(block_bytes(m, Fusion::compile, tp), block_bytes(m, Fusion::megatron, tp)) << "tp " << tp;
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig eager = config(c, 4, 1, 1, 1, 16, 4096), compiled = eager, fused = eager;
  compiled.fusion = Fusion::compile;
  fused.fusion = Fusion::megatron;
  const Prediction pe = run(m, c, eager), pc = run(m, c, compiled), pf = run(m, c, fused);
  EXPECT_LT(pc.time.forward_compute_s, pe.time.forward_compute_s);
  EXPECT_LT(pf.time.forward_compute_s, pc.time.forward_compute_s);
  // The difference from eager is the SwiGLU's memory traffic: 5 passes over M x f/t elements
  // (r/w gate, r silu and up, w product) against 3 (r gate and up, w product), forward and 2x backward.
  const double M = 4096.0, f = static_cast<double>(m.ffn_hidden) / 4, e = 2.0;
  const double saved_bytes = 2 * e * M * f * m.num_layers * pc.micro_batches;
  const double bw = c.hardware.device.memory_bandwidth_Bps;
  EXPECT_GT(pe.time.forward_compute_s - pc.time.forward_compute_s, 0.5 * saved_bytes / bw);
  EXPECT_LT(pe.time.forward_compute_s - pc.time.forward_compute_s, 3.0 * saved_bytes / bw);
  EXPECT_DOUBLE_EQ(pc.model_flops_per_step, pe.model_flops_per_step);
}

TEST(Fusion, FusedProjectionsAreNeverSlowerAndChangeNothingWithoutSeparateProjections) {
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 4, 1, 1, 1, 16, 4096);
  for (const char* name : {"llama2-70b", "llama2-7b", "mistral-7b"}) {
    const ModelSpec m = load_model(name);
    ParallelConfig fused = cfg;
    fused.fusion = Fusion::megatron;
    const Prediction pe = run(m, c, cfg), pf = run(m, c, fused);
    // GQA's narrow k and v GEMMs gain most from joining q: strictly faster forward and backward.
    EXPECT_LT(pf.time.forward_compute_s, pe.time.forward_compute_s) << name;
    EXPECT_LT(pf.time.backward_compute_s, pe.time.backward_compute_s) << name;
    EXPECT_DOUBLE_EQ(pf.model_flops_per_step, pe.model_flops_per_step) << name;  // same work
  }
  // GPT-2 has one c_attn and one c_fc (already fused) and a GELU MLP: nothing changes.
  const ModelSpec gpt = load_model("gpt2-xl");
  ParallelConfig g = config(c, 1, 1, 1, 4, 32, 1024), gf = g;
  gf.fusion = Fusion::megatron;
  EXPECT_DOUBLE_EQ(run(gpt, c, g).time.step_s, run(gpt, c, gf).time.step_s);
}

// GPT-J keeps q, k, v apart and a GELU MLP: with one micro-batch, fusion only joins q/k/v. On a flat GEMM
// curve with no per-kernel cost that is exactly the sum of its parts; on H100's measured curve
// the wider GEMM is more efficient.
TEST(Fusion, AFusedGemmGainsOnlyWhatTheEfficiencyCurveGives) {
  const ModelSpec m = load_model("gpt-j-6b");
  ClusterSpec flat = cluster("p5.48xlarge", 1);
  flat.hardware.device.gemm_efficiency = EfficiencyCurve{{0.0}, {0.5}};
  flat.hardware.device.kernel_launch_s = 0;
  ParallelConfig cfg = config(flat, 2, 1, 1, 1, 4, 2048), fused = cfg;  // one micro-batch: no accumulation
  fused.fusion = Fusion::megatron;
  EXPECT_NEAR(run(m, flat, fused).time.step_s, run(m, flat, cfg).time.step_s, 1e-12);
  const ClusterSpec h100 = cluster("p5.48xlarge", 1);
  EXPECT_LT(run(m, h100, fused).time.forward_compute_s, run(m, h100, cfg).time.forward_compute_s);
}

// Gradient accumulation over m micro-batches (ZeRO 0/1): eager PyTorch adds each later
// micro-batch's gradients into .grad, a memory-bound pass over them (both read, one written);
// Megatron-Core accumulates inside the weight-gradient GEMM. GPT-2 has nothing else to fuse.
TEST(Fusion, EagerGradientAccumulationIsOneMemoryPassPerLaterMicroBatch) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  for (int micro_batches : {1, 2, 8}) {
    ParallelConfig cfg = config(c, 1, 1, 1, 1, 8 * micro_batches, 1024), fused = cfg;  // dp 8, ZeRO-1
    fused.fusion = Fusion::megatron;
    const Prediction pe = run(m, c, cfg), pf = run(m, c, fused);
    const std::vector<LinearDesc> linears = m.block_linears();
    const std::vector<char> mask(linears.size(), 0);
    const CostEnv env = make_cost_env(m, c, cfg, linears, mask, BlockGroups{GroupPlacement{1, 1, 1}, {}, {}, {}});
    const double grad_bytes = 2.0 * static_cast<double>(pe.trainable_parameters);  // bf16 gradients
    const double per_step = (micro_batches - 1) * memory_time_s(env, 3 * grad_bytes);
    EXPECT_NEAR(pe.time.backward_compute_s - pf.time.backward_compute_s, per_step, 1e-9 + 1e-6 * per_step)
        << micro_batches << " micro-batches";
  }
}

// fp32 under ZeRO 0/1: shardrun adds the linears' weight gradients into the flat buffer inside
// their GEMM (flat_grad_fusion.hpp), so the pass covers only the rest: GPT-2's biases, norms and
// tied embeddings, and under sequence parallelism also the column linears (they keep PyTorch's
// own backward). GPT-2 (12 heads) for tp 2.
TEST(Fusion, Fp32EagerAccumulationSkipsTheGradientsAddedInsideTheGemm) {
  const ModelSpec m = load_model("gpt2");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  const int micro_batches = 4;
  for (int tp : {1, 2}) {
    ParallelConfig cfg = config(c, tp, 1, 1, 1, 8 / tp * micro_batches, 1024), fused = cfg;
    cfg.precision = Precision::fp32;
    cfg.sequence_parallel = tp > 1;
    fused = cfg;
    fused.fusion = Fusion::megatron;
    const Prediction pe = run(m, c, cfg), pf = run(m, c, fused);
    double column = 0;  // SP column linears' weights on one tp rank
    for (const LinearDesc& lin : m.block_linears())
      if (lin.split == TpSplit::column) column += static_cast<double>(lin.d_in) * lin.d_out / tp;
    // fp32 ZeRO-1 keeps every gradient of the rank whole: 4 bytes each.
    const double left =
        pe.worst.gradients / 4.0 - m.num_layers * (testing::linear_weights(m, tp) - (tp > 1 ? column : 0.0));
    ASSERT_GT(left, 0.0);
    const std::vector<LinearDesc> linears = m.block_linears();
    const std::vector<char> mask(linears.size(), 0);
    const CostEnv env = make_cost_env(m, c, cfg, linears, mask, BlockGroups{GroupPlacement{1, 1, 1}, {}, {}, {}});
    const double per_step = (micro_batches - 1) * memory_time_s(env, 3 * 4.0 * left);
    EXPECT_NEAR(pe.time.backward_compute_s - pf.time.backward_compute_s, per_step, 1e-9 + 1e-3 * per_step)
        << "tp " << tp;
  }
}

TEST(Fusion, RoundTripsThroughPlanJsonAndDefaultsToEager) {
  testing::expect_config_field_round_trip("fusion", &ParallelConfig::fusion, Fusion::megatron, Fusion::eager, "apex");
  EXPECT_EQ(fusion_from_string("megatron"), Fusion::megatron);
  EXPECT_EQ(fusion_from_string("compile"), Fusion::compile);
  EXPECT_FALSE(fusion_from_string("fused").has_value());
}

}  // namespace fusion_test
}  // namespace shardplan::simulator
