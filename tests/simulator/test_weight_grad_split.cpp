// The backward split into B (input gradients and the rest) and W (weight-gradient GEMMs), as the
// zero-bubble schedules run it: W's FLOPs are the closed form 2 x tokens x trained weights (dW =
// dY^T X has the forward GEMM's shape), frozen weights have none, and a chunk's W sums its parts.
#include <gtest/gtest.h>

#include "simulator/evaluator.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace weight_grad_split_test {  // named, not anonymous: the files share a unity-build unit

using shardplan::testing::cluster;
using shardplan::testing::config;
using shardplan::testing::linear_weights;

TEST(WeightGradSplit, DenseBlockWIsTwoTokensTimesItsWeights) {
  const ModelSpec m = load_model("llama2-7b");
  for (int tp : {1, 2, 4}) {
    const ClusterSpec c = cluster("p4de.24xlarge", 1);
    ParallelConfig cfg = config(c, tp, 1, 1, 2, 16, 2048);
    validate_config(m, c, cfg);
    const Evaluator ev(m, c);
    const ConfigContext ctx(ev.context(), cfg);
    const double tokens = 2.0 * 2048;  // micro-batch x sequence, every token on each tp rank
    EXPECT_DOUBLE_EQ(ctx.block.weight_grad_flops, 2 * tokens * linear_weights(m, tp)) << "tp " << tp;
    EXPECT_GT(ctx.block.weight_grad_s, 0);
    // W is one of a trained linear's three GEMMs: well under the backward, over a fifth of it.
    EXPECT_LT(ctx.block.weight_grad_s, 0.5 * ctx.block.backward_s) << "tp " << tp;
    EXPECT_GT(ctx.block.weight_grad_s, 0.2 * ctx.block.backward_s) << "tp " << tp;
    // The LM head is a trained linear too: (h x V/tp).
    EXPECT_DOUBLE_EQ(ctx.head.weight_grad_flops, 2 * tokens * static_cast<double>(m.hidden * m.vocab_size) / tp);
  }
}

TEST(WeightGradSplit, UnderLoraOnlyTheAdaptersHaveWeightGradients) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 1, 8, 2048);
  cfg.lora.rank = 16;
  cfg.lora.targets = {"q_proj", "v_proj"};
  validate_config(m, c, cfg);
  const Evaluator ev(m, c, cfg.lora);
  const ConfigContext ctx(ev.context(), cfg);
  // q_proj (h -> q_dim) and v_proj (h -> kv_dim): A (d_in x r) and B (r x d_out) each.
  const double r = 16, h = static_cast<double>(m.hidden);
  const double adapters = r * (h + m.q_dim()) + r * (h + m.kv_dim());
  EXPECT_DOUBLE_EQ(ctx.block.weight_grad_flops, 2 * 2048.0 * adapters);
  EXPECT_EQ(ctx.head.weight_grad_flops, 0);  // the head is frozen
}

TEST(WeightGradSplit, AChunkSumsItsBlocksAndHead) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 2, 1, 1, 16, 2048);
  validate_config(m, c, cfg);
  const Evaluator ev(m, c);
  const ConfigContext ctx(ev.context(), cfg);
  const ChunkTime last = chunk_time(ctx, chunk_shape(m, cfg, 0, 1));  // 16 blocks and the head
  EXPECT_NEAR(last.weight_grad_s, 16 * ctx.block.weight_grad_s + ctx.head.weight_grad_s, 1e-12 * last.backward_s);
  EXPECT_LT(last.weight_grad_s, last.backward_s);
}

TEST(WeightGradSplit, MoeRouterAndExpertsTrain) {
  const ModelSpec m = load_model("mixtral-8x7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 4096);
  cfg.ep = 8;
  validate_config(m, c, cfg);
  const Evaluator ev(m, c);
  const ConfigContext ctx(ev.context(), cfg);
  const double T = 4096, h = static_cast<double>(m.hidden), E = static_cast<double>(m.moe.num_experts);
  double experts = 0;  // balanced: every routed copy through each expert linear
  for (const LinearDesc& lin : m.expert_linears()) experts += static_cast<double>(lin.d_in) * lin.d_out;
  const double attention = linear_weights(m, 1);  // the block's dense linears (attention only in Mixtral)
  const double want = 2 * T * attention + 2 * T * h * E + 2 * T * m.moe.top_k * experts;
  EXPECT_NEAR(ctx.block.weight_grad_flops, want, 1e-9 * want);
}

}  // namespace weight_grad_split_test
}  // namespace shardplan::simulator
