// The word embedding's backward: a trained table's gradient is dense (a zero-filled V/t x h tensor,
// then the rows scatter-added), and a table tied to the LM head on the same stage gets both
// gradients summed; a frozen table (LoRA) has no gradient at all.
#include <gtest/gtest.h>

#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace embedding_grad_test {  // named, not anonymous: the files share a unity-build unit

using testing::BlockEnv;

ParallelConfig gpt2_layout(int tp) {
  ParallelConfig cfg;
  cfg.tp = tp;
  cfg.seq_len = 128;
  cfg.micro_batch_size = 1;
  cfg.precision = Precision::fp32;
  return cfg;
}

TEST(EmbeddingGrad, ATrainedTablesBackwardGrowsWithTheVocabularyNotOnlyTheTokens) {
  BlockEnv big("gpt2", "local-cpu-2core");
  ModelSpec small_vocab = big.m;
  small_vocab.vocab_size = 1024;
  BlockEnv small(small_vocab, "local-cpu-2core");
  const double big_bwd = embedding_cost(big.env(gpt2_layout(1)), false).backward_s;
  const double small_bwd = embedding_cost(small.env(gpt2_layout(1)), false).backward_s;
  // The same 128 tokens' rows either way: the difference is the (V, h) gradient written whole.
  EXPECT_GT(big_bwd, 10 * small_bwd);
  // Over two tensor-parallel ranks each holds half the vocabulary's gradient.
  const double tp2_bwd = embedding_cost(big.env(gpt2_layout(2)), false).backward_s;
  EXPECT_LT(tp2_bwd, 0.75 * big_bwd);
  EXPECT_GT(tp2_bwd, 0.25 * big_bwd);
}

TEST(EmbeddingGrad, ATiedTablePaysTheSumOfItsTwoGradientsAndAFrozenOneNothing) {
  const BlockEnv be("gpt2", "local-cpu-2core");
  const double untied = embedding_cost(be.env(gpt2_layout(1)), false).backward_s;
  const double tied = embedding_cost(be.env(gpt2_layout(1)), true).backward_s;
  // The sum reads two tables and writes one: more than the zero fill's one write, over again.
  EXPECT_GT(tied - untied, untied);
  ParallelConfig lora = gpt2_layout(1);
  lora.lora.rank = 8;
  lora.lora.targets = {"c_attn"};
  const PartCost frozen = embedding_cost(be.env(lora), true);
  EXPECT_EQ(frozen.backward_s, 0.0);
  EXPECT_GT(frozen.forward_s, 0.0);
}

}  // namespace embedding_grad_test
}  // namespace shardplan::simulator
