// Frozen linears keep no input (layer_cost.cpp, kept_linear_inputs): under LoRA a base linear's
// input is stored only where an adapter reads it undropped, as PyTorch's autograd and Transformer
// Engine save a matmul's input only for its weight's gradient. Each case against the closed form
// of what one block stores on one tensor-parallel rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "simulator/layer_cost.hpp"
#include "support/block_env.hpp"

namespace shardplan::simulator {
namespace frozen_inputs_test {  // named, not anonymous: the files share a unity-build unit

// One block with adapters of rank 16 on `targets` (none: full training) and its stored bytes.
struct LoraBlock : testing::BlockEnv {
  explicit LoraBlock(const char* model) : BlockEnv(model, "p4de.24xlarge") {}

  double bytes(const std::vector<std::string>& targets, double dropout, AttentionKind kind, int tp, bool sp) {
    ParallelConfig cfg;
    cfg.tp = tp;
    cfg.sequence_parallel = sp;
    cfg.seq_len = kSeq;
    cfg.micro_batch_size = kBatch;
    cfg.attention = kind;
    mask.assign(linears.size(), 0);
    if (!targets.empty()) {
      cfg.lora.rank = kRank;
      cfg.lora.dropout = dropout;
      cfg.lora.targets = targets;
      for (std::size_t i = 0; i < linears.size(); ++i)
        for (const std::string& t : targets) mask[i] = mask[i] || lora_target_matches(linears[i].module, t);
    }
    return BlockEnv::bytes(cfg);
  }
  static constexpr int kSeq = 2048, kBatch = 2, kRank = 16;
  static constexpr double M = double(kSeq) * kBatch, e = 2.0;  // tokens, bf16 bytes
};

// Llama (SwiGLU), flash attention: adapters on q and v read the norm1 output, which stays; the
// frozen MLP keeps neither its input (the norm2 output) nor FC2's input (the gated product).
TEST(FrozenInputs, FrozenMlpKeepsNeitherInput) {
  LoraBlock b("llama2-7b");
  const double h = b.m.hidden, f = b.m.ffn_hidden, r = LoraBlock::kRank, M = LoraBlock::M, e = LoraBlock::e;
  for (int tp : {1, 2}) {
    const double full = b.bytes({}, 0, AttentionKind::flash, tp, false);
    const double qv = b.bytes({"q_proj", "v_proj"}, 0, AttentionKind::flash, tp, false);
    EXPECT_DOUBLE_EQ(qv, full - e * M * h - e * M * f / tp + 2 * e * M * r) << "tp " << tp;
  }
}

// Adapters on every linear keep every input: full training's block plus each adapter's A output.
TEST(FrozenInputs, AdaptersEverywhereKeepEveryInput) {
  LoraBlock b("llama2-7b");
  const double M = LoraBlock::M, e = LoraBlock::e, r = LoraBlock::kRank;
  const std::vector<std::string> all{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  for (AttentionKind kind : {AttentionKind::flash, AttentionKind::eager}) {
    const double full = b.bytes({}, 0, kind, 2, true);
    EXPECT_DOUBLE_EQ(b.bytes(all, 0, kind, 2, true), full + 7 * e * M * r);
  }
}

// A dropped adapter keeps its own mask and dropped copy, so the shared input itself goes too.
TEST(FrozenInputs, DroppedAdaptersKeepTheirOwnCopyOnly) {
  LoraBlock b("llama2-7b");
  const double h = b.m.hidden, f = b.m.ffn_hidden, r = LoraBlock::kRank, M = LoraBlock::M, e = LoraBlock::e;
  const double full = b.bytes({}, 0, AttentionKind::flash, 1, false);
  const double qv = b.bytes({"q_proj", "v_proj"}, 0.1, AttentionKind::flash, 1, false);
  const double adapter = e * M * r + (1 + e) * M * h;  // A's output, the mask and the dropped input
  EXPECT_DOUBLE_EQ(qv, full - 2 * e * M * h - e * M * f + 2 * adapter);
}

// Eager attention keeps p and v for p @ v, not its output: a frozen output projection without
// adapter drops its input; flash attention keeps that tensor (its O) either way.
TEST(FrozenInputs, EagerDropsTheOutputProjectionInputFlashKeepsO) {
  LoraBlock b("gpt2");
  const double h = b.m.hidden, f = b.m.ffn_hidden, r = LoraBlock::kRank, M = LoraBlock::M, e = LoraBlock::e;
  const double mlp = e * M * h + e * M * f;  // the frozen MLP's two inputs (GELU: FC2 reads gelu's output)
  const double adapter = e * M * r;
  EXPECT_DOUBLE_EQ(b.bytes({"c_attn"}, 0, AttentionKind::flash, 1, false),
                   b.bytes({}, 0, AttentionKind::flash, 1, false) - mlp + adapter);
  EXPECT_DOUBLE_EQ(b.bytes({"c_attn"}, 0, AttentionKind::eager, 1, false),
                   b.bytes({}, 0, AttentionKind::eager, 1, false) - mlp - e * M * b.m.attn_out_dim() + adapter);
}

// GPT-J's parallel residual feeds one norm's output to attention and the MLP: an adapter on
// either keeps it.
TEST(FrozenInputs, ParallelResidualSharesOneNormOutput) {
  LoraBlock b("gpt-j-6b");
  ASSERT_EQ(b.m.norms_per_layer, 1);
  const double h = b.m.hidden, f = b.m.ffn_hidden, r = LoraBlock::kRank, M = LoraBlock::M, e = LoraBlock::e;
  const double full = b.bytes({}, 0, AttentionKind::flash, 1, false);
  EXPECT_DOUBLE_EQ(b.bytes({"fc_in"}, 0, AttentionKind::flash, 1, false), full - e * M * f + e * M * r);
  EXPECT_DOUBLE_EQ(b.bytes({"out_proj"}, 0, AttentionKind::flash, 1, false), full - e * M * h - e * M * f + e * M * r);
}

}  // namespace frozen_inputs_test
}  // namespace shardplan::simulator
