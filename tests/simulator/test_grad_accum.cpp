// fp32 gradient accumulation (ParallelConfig::grad_accum_dtype): DeepSpeed's BF16_Optimizer casts
// and adds every micro-batch's bf16 gradients into an fp32 buffer (one memory pass of w + 16 bytes
// per gradient), Megatron's fused weight-gradient GEMM accumulates into main_grad with no pass;
// the buffer's bytes against the closed form, the reduction in fp32, the stages it needs, the
// planner applying it where it can, and the plan.json round trip.
#include <gtest/gtest.h>

#include "simulator/errors.hpp"
#include "simulator/layer_cost.hpp"
#include "simulator/prediction_json.hpp"
#include "support/block_env.hpp"
#include "support/config_round_trip.hpp"
#include "support/input_error.hpp"

namespace shardplan::simulator {
namespace grad_accum_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

ParallelConfig with(ParallelConfig cfg, GradAccumDtype d, Fusion f = Fusion::eager) {
  cfg.grad_accum_dtype = d;
  cfg.fusion = f;
  return cfg;
}

TEST(GradAccum, Fp32CastAndAddIsOnePassPerMicroBatch) {
  // gpt2-xl has nothing Megatron would fuse: eager and megatron differ only in the accumulation.
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  for (int micro_batches : {1, 2, 8}) {
    const ParallelConfig cfg = config(c, 1, 1, 1, 1, 8 * micro_batches, 1024);  // dp 8, ZeRO-1, bf16
    const Prediction eager = run(m, c, with(cfg, GradAccumDtype::fp32));
    const Prediction fused = run(m, c, with(cfg, GradAccumDtype::fp32, Fusion::megatron));
    const std::vector<LinearDesc> linears = m.block_linears();
    const std::vector<char> mask(linears.size(), 0);
    const CostEnv env = make_cost_env(m, c, cfg, linears, mask, BlockGroups{GroupPlacement{1, 1, 1}, {}, {}, {}});
    const double grads = static_cast<double>(eager.trainable_parameters);
    const double per_step = micro_batches * memory_time_s(env, (2.0 + 16.0) * grads);
    EXPECT_NEAR(eager.time.backward_compute_s - fused.time.backward_compute_s, per_step, 1e-9 + 1e-6 * per_step)
        << micro_batches << " micro-batches";
  }
}

TEST(GradAccum, TheFp32BufferIsHeldBesideOrInsteadOfTheBf16Gradients) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  const ParallelConfig cfg = config(c, 1, 1, 0, 1, 32, 1024);
  const double bf16 = run(m, c, cfg).worst.gradients;
  ASSERT_GT(bf16, 0.0);
  // DeepSpeed keeps the bf16 .grad and adds a 4-byte buffer: 2 + 4 bytes; Megatron's main_grad
  // replaces .grad: 4 bytes.
  EXPECT_DOUBLE_EQ(run(m, c, with(cfg, GradAccumDtype::fp32)).worst.gradients, 3.0 * bf16);
  EXPECT_DOUBLE_EQ(run(m, c, with(cfg, GradAccumDtype::fp32, Fusion::megatron)).worst.gradients, 2.0 * bf16);
}

TEST(GradAccum, Fp32GradientsAreReducedInFp32) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4de.24xlarge", 4);  // the all-reduce crosses nodes: bandwidth-bound
  const ParallelConfig cfg = with(config(c, 1, 1, 0, 1, 64, 1024), GradAccumDtype::param, Fusion::megatron);
  const double bf16 = run(m, c, cfg).time.dp_total_comm_s;
  const double fp32 = run(m, c, with(cfg, GradAccumDtype::fp32, Fusion::megatron)).time.dp_total_comm_s;
  // Twice the bytes; the latency terms do not double.
  EXPECT_GT(fp32, 1.8 * bf16);
  EXPECT_LE(fp32, 2.0 * bf16);
}

TEST(GradAccum, NeedsZeroZeroOrOneAndSixteenBitWeights) {
  const ModelSpec m = load_model("gpt2");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  for (int zero : {2, 3}) {
    const std::string why = testing::refusal(m, c, with(config(c, 1, 1, zero, 1, 8, 1024), GradAccumDtype::fp32));
    EXPECT_NE(why.find("--grad-accum-dtype"), std::string::npos) << "zero " << zero << ": " << why;
  }
  ParallelConfig fp32 = with(config(c, 1, 1, 1, 1, 8, 1024), GradAccumDtype::fp32);
  fp32.precision = Precision::fp32;
  EXPECT_NE(testing::refusal(m, c, fp32).find("--grad-accum-dtype"), std::string::npos);
  EXPECT_EQ(testing::refusal(m, c, with(config(c, 1, 1, 1, 1, 8, 1024), GradAccumDtype::fp32)), "");
  // The planner asks for fp32 everywhere and gets it only where it applies.
  EXPECT_EQ(grad_accum_for(config(c, 1, 1, 3, 1, 8, 1024), GradAccumDtype::fp32), GradAccumDtype::param);
  EXPECT_EQ(grad_accum_for(fp32, GradAccumDtype::fp32), GradAccumDtype::param);
  EXPECT_EQ(grad_accum_for(config(c, 1, 1, 0, 1, 8, 1024), GradAccumDtype::fp32), GradAccumDtype::fp32);
}

TEST(GradAccum, RoundTripsThroughPlanJsonAndDefaultsToParam) {
  testing::expect_config_field_round_trip("grad_accum_dtype", &ParallelConfig::grad_accum_dtype, GradAccumDtype::fp32,
                                          GradAccumDtype::param, "bf16");
  EXPECT_FALSE(grad_accum_dtype_from_string("fp16").has_value());
}

}  // namespace grad_accum_test
}  // namespace shardplan::simulator
