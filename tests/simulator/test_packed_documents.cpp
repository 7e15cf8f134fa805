// Packed sequences (ParallelConfig::packed_document_tokens): documents of l tokens packed into one
// sequence of s, each attending only within itself (cu_seqlens: Megatron-Core's THD
// PackedSeqParams through Transformer Engine, flash-attn's varlen kernels). The fused attention
// core then does s/l blocks of l x l: its FLOPs scale by l/s, its kernel runs at sequence length l,
// its stored tensors (O, log-sum-exp) are unchanged; everything else in the block is untouched.
#include <gtest/gtest.h>

#include <string>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace packed_documents_test {  // named, not anonymous: the files share a unity-build unit

using testing::BlockEnv;
using testing::cluster;
using testing::config;
using testing::run;

ParallelConfig packed(int s, int l, AttentionKind kind = AttentionKind::flash) {
  ParallelConfig cfg;
  cfg.seq_len = s;
  cfg.micro_batch_size = 1;
  cfg.attention = kind;
  cfg.packed_document_tokens = l;
  return cfg;
}

TEST(PackedDocuments, AttentionFlopsScaleByDocumentOverSequenceAndMemoryStays) {
  const BlockEnv be("llama2-7b", "p5.48xlarge");
  for (AttentionKind kind : {AttentionKind::flash, AttentionKind::flash1})
    for (int l : {128, 256, 1000}) {
      SCOPED_TRACE(std::to_string(l));
      const AttentionFlops whole = attention_flops(be.env(packed(4096, 0, kind)));
      const AttentionFlops docs = attention_flops(be.env(packed(4096, l, kind)));
      const double k = l / 4096.0;
      EXPECT_NEAR(docs.model_forward, k * whole.model_forward, 1e-9 * whole.model_forward);
      EXPECT_NEAR(docs.executed_forward, k * whole.executed_forward, 1e-9 * whole.executed_forward);
      EXPECT_NEAR(docs.executed_backward, k * whole.executed_backward, 1e-9 * whole.executed_backward);
      EXPECT_DOUBLE_EQ(be.bytes(packed(4096, l, kind)), be.bytes(packed(4096, 0, kind)));
    }
}

TEST(PackedDocuments, TheKernelRunsAtTheDocumentLength) {
  const BlockEnv be("llama2-7b", "p5.48xlarge");
  const CostEnv env = be.env(packed(4096, 1024));
  const AttentionFlops f = attention_flops(env);
  const auto& dev = be.c.hardware.device;
  const AttentionTime t = flash_attention_time(env);
  // Compute-bound at this size: executed FLOPs over the curve's efficiency at 1,024 tokens.
  EXPECT_NEAR(
      t.forward_s,
      f.executed_forward / (env.peak_flops * dev.flash_attention.at(true, 128, 1024, false)) + dev.kernel_launch_s,
      1e-12);
  EXPECT_NEAR(
      t.backward_s,
      f.executed_backward / (env.peak_flops * dev.flash_attention.at(true, 128, 1024, true)) + dev.kernel_launch_s,
      1e-12);
}

TEST(PackedDocuments, OnlyTheAttentionCoreGetsFaster) {
  const ModelSpec m = load_model("tinyllama-1.1b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 8, 8192);
  const Prediction whole = run(m, c, cfg);
  cfg.packed_document_tokens = 256;
  const Prediction docs = run(m, c, cfg);
  ASSERT_TRUE(whole.feasible && docs.feasible);
  EXPECT_LT(docs.time.step_s, whole.time.step_s);
  EXPECT_LT(docs.model_flops_per_step, whole.model_flops_per_step);
  EXPECT_DOUBLE_EQ(docs.worst.activations, whole.worst.activations);
  EXPECT_DOUBLE_EQ(docs.time.dp_total_comm_s, whole.time.dp_total_comm_s);
  // The step saves what one block's attention core saves, per block and micro-batch.
  const BlockEnv be(m, "p5.48xlarge");
  const AttentionTime a = flash_attention_time(be.env(packed(8192, 0)));
  const AttentionTime b = flash_attention_time(be.env(packed(8192, 256)));
  const double per_step = static_cast<double>(m.num_layers) * (a.forward_s + a.backward_s - b.forward_s - b.backward_s);
  EXPECT_NEAR(whole.time.step_s - docs.time.step_s, per_step, 0.02 * per_step);
}

TEST(PackedDocuments, RefusedWithoutAFusedKernelWithContextParallelismOrPastTheSequence) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  auto refused = [&](ParallelConfig cfg, const char* expected) {
    try {
      validate_config(m, c, cfg);
      ADD_FAILURE() << "expected an InputError naming " << expected;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("--packed-document-tokens"), std::string::npos) << msg;
      EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    }
  };
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 8, 4096);
  cfg.packed_document_tokens = 512;
  ParallelConfig fine = cfg;
  validate_config(m, c, fine);
  ParallelConfig eager = cfg;
  eager.attention = AttentionKind::eager;
  refused(eager, "flash or flash1");
  ParallelConfig cp = cfg;
  cp.cp = 2;
  cp.dp = 4;
  refused(cp, "--cp 1");
  ParallelConfig longer = cfg;
  longer.packed_document_tokens = 4096;
  refused(longer, "fewer tokens than --seq-len");
  ParallelConfig negative = cfg;
  negative.packed_document_tokens = -3;
  refused(negative, "positive");
}

TEST(PackedDocuments, RoundTripsThroughPlanJsonAndDefaultsToOneDocument) {
  ParallelConfig cfg;
  cfg.seq_len = 4096;
  cfg.packed_document_tokens = 220;
  nlohmann::json j = to_json(cfg);
  EXPECT_EQ(j["packed_document_tokens"], 220);
  EXPECT_EQ(config_from_json(j, "plan.json").packed_document_tokens, 220);
  j.erase("packed_document_tokens");  // a plan written before the field
  EXPECT_EQ(config_from_json(j, "plan.json").packed_document_tokens, 0);
  j["packed_document_tokens"] = -1;
  try {
    (void)config_from_json(j, "plan.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("plan.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("config.packed_document_tokens"), std::string::npos) << msg;
  }
}

}  // namespace packed_documents_test
}  // namespace shardplan::simulator
