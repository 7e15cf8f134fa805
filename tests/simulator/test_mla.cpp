// Multi-head latent attention (DeepSeek-V3's card): the attention core's FLOPs with 192-wide
// query/key heads and 128-wide value heads, the latents stored for backward against their closed
// form, down-projections replicated over tensor-parallel ranks, and a whole-model simulation.
#include <gtest/gtest.h>

#include "simulator/layer_cost.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace mla_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;

using testing::BlockEnv;

constexpr int kSeq = 4096;

TEST(Mla, AttentionFlopsUseQueryKeyAndValueHeadWidths) {
  const ModelSpec m = load_model("deepseek-v3");
  ASSERT_TRUE(m.mla.enabled());
  ASSERT_EQ(m.head_dim, 192);  // 128 without rotation + 64 rotary
  for (int tp : {1, 2, 8}) {
    const BlockEnv e(m, "p5.48xlarge");
    const double s = kSeq, heads = 128.0 / tp;
    // Q K^T over 192 dims and P V over 128, 2 FLOPs per multiply-add.
    EXPECT_DOUBLE_EQ(attention_flops(e.env(AttentionKind::flash, tp, kSeq, 1)).model_forward,
                     2.0 * heads * s * s * (192 + 128));
  }
}

TEST(Mla, StoredLatentsFollowTheClosedForm) {
  ModelSpec half = load_model("deepseek-v3");
  half.mla.q_lora_rank = 768;
  const BlockEnv full("deepseek-v3", "p5.48xlarge"), smaller(half, "p5.48xlarge");
  const double M = kSeq, e = 2;
  // The q latent and its norm's input: 2 x e x M x (1536 - 768) more with the wider latent.
  EXPECT_DOUBLE_EQ(full.bytes(AttentionKind::flash, 1, kSeq, 1) - smaller.bytes(AttentionKind::flash, 1, kSeq, 1),
                   2 * e * M * (1536 - 768));
  // Values are 128 wide per head: the output projection reads a x 128, not a x 192.
  EXPECT_EQ(load_model("deepseek-v3").attn_out_dim(), 128 * 128);
}

TEST(Mla, DownProjectionsAreReplicatedOverTensorParallelRanks) {
  const ModelSpec m = load_model("deepseek-v3");
  int replicated = 0;
  for (const LinearDesc& lin : m.block_linears()) {
    if (lin.split != TpSplit::replicated) continue;
    ++replicated;
    EXPECT_DOUBLE_EQ(lin.weight_local(8), static_cast<double>(lin.d_in) * lin.d_out) << lin.module;
  }
  EXPECT_EQ(replicated, 2);  // q_a_proj, kv_a_proj_with_mqa
  const ParameterCounts n = count_parameters(m);
  EXPECT_LT(n.per_layer_tp_sharded, n.per_layer - n.per_layer_experts);
}

TEST(Mla, DeepSeekV3SimulatesOn256H100s) {
  const ModelSpec m = load_model("deepseek-v3");
  const ClusterSpec c = cluster("p5.48xlarge", 32);
  ParallelConfig cfg = config(c, 1, 16, 1, 1, 1024, 4096);
  cfg.dp = 16;
  cfg.ep = 16;
  cfg.partition = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2};
  const Prediction p = simulate(m, c, cfg);
  EXPECT_GT(p.tokens_per_s, 0);
  EXPECT_GT(p.time.ep_comm_s, 0);
  // Per token the model runs ~6 x 37B active parameters (Kaplan et al. 2020) plus attention.
  const double per_token = p.model_flops_per_step / p.tokens_per_step;
  EXPECT_GT(per_token, 6.0 * 37e9 * 0.9);
  EXPECT_LT(per_token, 6.0 * 37e9 * 1.6);
}

}  // namespace mla_test
}  // namespace shardplan::simulator
