// What a step pays after its last backward besides the ZeRO stage's own reduction: DeepSpeed's
// BF16_Optimizer all-reduces the whole fp32 gradients and all-gathers the updated weights with
// nothing overlapped (grad_accum_dtype fp32 under eager fusion), and a tied word embedding's
// gradient is all-reduced between the first and the last pipeline stage. Each against the
// collectives it is made of.
#include <gtest/gtest.h>

#include "simulator/collectives.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace reduce_tail_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

TEST(ReduceTail, Bf16OptimizerAllReducesTheWholeFp32GradientsAndHidesNothing) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4de.24xlarge", 4);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 64, 1024);  // dp 32 over 4 nodes, ZeRO-1, bf16
  cfg.grad_accum_dtype = GradAccumDtype::fp32;
  const Prediction ds = run(m, c, cfg);  // fusion eager: DeepSpeed's BF16_Optimizer
  cfg.fusion = Fusion::megatron;         // Megatron's main_grad with the distributed optimizer
  const Prediction mg = run(m, c, cfg);
  const double params = static_cast<double>(ds.trainable_parameters);
  const GroupPlacement dp{32, 4, 8};
  const auto& hw = c.hardware;
  const double ar = all_reduce_s(4.0 * params, dp, hw, 8), rs = reduce_scatter_s(4.0 * params, dp, hw, 8);
  const double ag = all_gather_s(2.0 * params, dp, hw, 8);
  EXPECT_NEAR(ds.time.dp_total_comm_s, ar + ag, 1e-9 * (ar + ag));
  EXPECT_NEAR(ds.time.dp_exposed_comm_s, ar + ag, 1e-9 * (ar + ag));
  EXPECT_NEAR(mg.time.dp_total_comm_s, rs + ag, 1e-9 * (rs + ag));
  EXPECT_LT(mg.time.dp_exposed_comm_s, mg.time.dp_total_comm_s);  // buckets behind the backward
  EXPECT_GT(ds.time.step_s, mg.time.step_s);
}

TEST(ReduceTail, TiedEmbeddingGradientIsAllReducedAcrossThePipelineEnds) {
  const ModelSpec m = load_model("gpt3-175b");
  ASSERT_TRUE(m.tied_embeddings);
  const double vocab = static_cast<double>(m.vocab_size) * m.hidden;
  for (int nodes : {1, 2}) {
    SCOPED_TRACE(std::to_string(nodes) + " node(s)");
    const ClusterSpec c = cluster("p4de.24xlarge", nodes);
    const int tp = 4 * nodes;  // dp 1; the two stages share a node, or each has its own
    ParallelConfig cfg = config(c, tp, 2, 0, 1, 8, 1024);
    ASSERT_EQ(cfg.dp, 1);
    const double expected = all_reduce_s(2.0 * vocab / tp, GroupPlacement{2, nodes, nodes == 1 ? 2 : 1}, c.hardware, 8);
    const Prediction p = run(m, c, cfg);
    EXPECT_NEAR(p.time.dp_total_comm_s, expected, 1e-9 * expected);
    EXPECT_GT(p.time.dp_exposed_comm_s, 0.0);
    // An untied head has nothing to synchronise; under LoRA the embedding is frozen.
    ModelSpec untied = m;
    untied.tied_embeddings = false;
    EXPECT_DOUBLE_EQ(run(untied, c, cfg).time.dp_total_comm_s, 0.0);
    cfg.lora.rank = 8;
    cfg.lora.targets = {"c_attn"};
    EXPECT_DOUBLE_EQ(run(m, c, cfg).time.dp_total_comm_s, 0.0);
  }
}

}  // namespace reduce_tail_test
}  // namespace shardplan::simulator
