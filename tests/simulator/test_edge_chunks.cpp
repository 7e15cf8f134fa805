// Pipeline layouts whose first chunk holds only the embedding and whose last holds only the head
// (Megatron-Core's --pipeline-model-parallel-layout "E|(t*16|)*2,L", torchtitan's
// [["tok_embeddings"], ..., ["norm", "output"]]): accepted there and nowhere else, and simulated
// with each edge stage holding and costing only its part.
#include <gtest/gtest.h>

#include <string>

#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace edge_chunks_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;

std::string refusal(const ModelSpec& m, const ClusterSpec& c, ParallelConfig cfg) {
  try {
    validate_config(m, c, cfg);
  } catch (const InputError& e) { return e.what(); }
  return "";
}

// llama2-7b (32 layers) over tp 2 x pp 4 of one p4de node: stage 0 the embedding, stage 3 the head.
TEST(EdgeChunks, EmbeddingOnlyAndHeadOnlyStagesHoldAndCostOnlyTheirParts) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  for (const PipelineSchedule schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe}) {
    ParallelConfig cfg = config(c, 2, 4, 0, 1, 16, 4096);
    cfg.schedule = schedule;
    cfg.partition = {0, 16, 16, 0};
    validate_config(m, c, cfg);
    const Evaluator ev(m, c, cfg.lora);
    const ConfigContext ctx(ev.context(), cfg);
    const Prediction p = ev.simulate(cfg);
    ASSERT_EQ(p.stages.size(), 4u);
    const StagePrediction &first = p.stages[0], &middle = p.stages[1], &last = p.stages[3];
    const char* name = to_string(schedule);
    EXPECT_EQ(first.layers, 0);
    EXPECT_TRUE(first.has_embedding && !first.has_head) << name;
    EXPECT_EQ(last.layers, 0);
    EXPECT_TRUE(last.has_head && !last.has_embedding) << name;
    // Memory: the embedding's weights and states on stage 0, the head's on stage 3, no block's.
    EXPECT_EQ(first.parameters_per_device, static_cast<int64_t>(ctx.embedding_params)) << name;
    EXPECT_EQ(last.parameters_per_device, static_cast<int64_t>(ctx.head_params)) << name;
    EXPECT_NEAR(first.memory.parameters, 2 * ctx.embedding_params, 1) << name;  // bf16 weights
    EXPECT_NEAR(first.memory.optimizer_states, 12 * ctx.embedding_params, 1) << name;
    EXPECT_NEAR(last.memory.gradients, 2 * ctx.head_params, 1) << name;
    // No block activations on stage 0; the head's (its input and the fp32 logits) on stage 3.
    EXPECT_NEAR(first.memory.activations, first.in_flight_micro_batches * ctx.embedding.stored_activation_bytes, 1)
        << name;
    EXPECT_NEAR(last.memory.activations, last.in_flight_micro_batches * ctx.head.stored_activation_bytes, 1) << name;
    EXPECT_GT(last.memory.activations, 0) << name;
    EXPECT_LT(first.memory.activations, 0.01 * middle.memory.activations) << name;
    // The logits live beside the fp32 softmax in the head stage's workspace only.
    EXPECT_GE(last.memory.workspace, ctx.head.transient_bytes) << name;
    EXPECT_LT(first.memory.workspace, ctx.head.transient_bytes) << name;
    // Time: each edge stage's pass is its part's cost, not a block's.
    const ChunkTime e = chunk_time(ctx, {0, true, false, 0});
    const ChunkTime h = chunk_time(ctx, {0, false, true, 0});
    EXPECT_DOUBLE_EQ(first.forward_s, e.forward_s) << name;
    EXPECT_DOUBLE_EQ(first.backward_s, e.backward_s) << name;
    EXPECT_DOUBLE_EQ(last.forward_s, h.forward_s) << name;
    EXPECT_DOUBLE_EQ(last.backward_s, h.backward_s) << name;
    EXPECT_GE(first.forward_s, ctx.embedding.forward_total_s()) << name;
    EXPECT_LT(first.forward_s, ctx.block.forward_total_s()) << name;
    EXPECT_GE(last.backward_s, ctx.head.backward_total_s()) << name;
    EXPECT_LT(last.forward_s, chunk_time(ctx, {1, false, true, 0}).forward_s) << name;
    EXPECT_NEAR(middle.forward_s, chunk_time(ctx, {16, false, false, 0}).forward_s, 1e-12) << name;
    // Both edge stages run every micro-batch in the schedule.
    int edge_ops = 0;
    for (const PipelineEvent& ev_op : p.pipeline.events) edge_ops += ev_op.stage == 0 || ev_op.stage == 3;
    EXPECT_EQ(edge_ops, 2 * 2 * cfg.micro_batches()) << name;
    EXPECT_GT(p.pipeline.stage_end_s[0], p.pipeline.stage_end_s[3]) << name;  // stage 0's backward ends last
    // The closed form agrees with the event simulation.
    const Estimate est = ev.estimate(cfg);
    EXPECT_NEAR(est.worst_memory_bytes, p.worst.total(), 0.01 * p.worst.total()) << name;
    EXPECT_NEAR(est.step_s, p.time.step_s, 0.05 * p.time.step_s) << name;
  }
}

// Interleaved, pp 2 x v 2: chunk 0 (stage 0) only the embedding, chunk 3 (stage 1's last) only the head.
TEST(EdgeChunks, InterleavedFirstAndLastChunksHoldOnlyTheEmbeddingAndTheHead) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 4, 2, 1, 1, 16, 4096);
  cfg.schedule = PipelineSchedule::interleaved;
  cfg.virtual_stages = 2;
  cfg.partition = {0, 16, 16, 0};
  validate_config(m, c, cfg);
  const Evaluator ev(m, c, cfg.lora);
  const ConfigContext ctx(ev.context(), cfg);
  const Prediction p = ev.simulate(cfg);
  ASSERT_EQ(p.stages.size(), 2u);
  const StagePrediction &s0 = p.stages[0], &s1 = p.stages[1];
  EXPECT_EQ(s0.layers, 16);
  EXPECT_TRUE(s0.has_embedding && !s0.has_head);
  EXPECT_EQ(s1.layers, 16);
  EXPECT_TRUE(s1.has_head && !s1.has_embedding);
  EXPECT_EQ(s0.parameters_per_device, static_cast<int64_t>(ctx.embedding_params + 16 * ctx.block_params));
  EXPECT_EQ(s1.parameters_per_device, static_cast<int64_t>(ctx.head_params + 16 * ctx.block_params));
  // A stage's pass is the sum of its chunks': chunk 0 the embedding alone, chunk 3 the head alone.
  const ChunkTime e = chunk_time(ctx, {0, true, false, 0}), h = chunk_time(ctx, {0, false, true, 0});
  const ChunkTime blocks = chunk_time(ctx, {16, false, false, 0});
  EXPECT_NEAR(s0.forward_s, e.forward_s + blocks.forward_s, 1e-12);
  EXPECT_NEAR(s1.backward_s, h.backward_s + blocks.backward_s, 1e-12);
  // The event simulation times chunk 0's ops at the embedding's cost, chunk 3's (stage 1's
  // chunk 1) at the head's.
  for (const PipelineEvent& op : p.pipeline.events) {
    if (op.stage == 0 && op.chunk == 0) {
      EXPECT_NEAR(op.end_s - op.start_s, op.backward ? e.backward_s : e.forward_s, 1e-12);
    }
    if (op.stage == 1 && op.chunk == 1) {
      EXPECT_NEAR(op.end_s - op.start_s, op.backward ? h.backward_s : h.forward_s, 1e-12);
    }
  }
  // Interleaved unequal chunks have no closed form (the in-flight peak is not in-flight count x
  // mean chunk, here 8 % under): the estimate is the simulation's.
  const Estimate est = ev.estimate(cfg);
  EXPECT_DOUBLE_EQ(est.worst_memory_bytes, p.worst.total());
  EXPECT_DOUBLE_EQ(est.step_s, p.time.step_s);
  EXPECT_EQ(est.fits, p.feasible);
}

// An MoE card with a dense first block: behind an embedding-only chunk it lands on chunk 1.
TEST(EdgeChunks, DenseFirstBlocksOfAnMoeCardFollowAnEmbeddingOnlyChunk) {
  const ModelSpec m = load_model("tiny-moe");  // 4 blocks, block 0 dense
  const ClusterSpec c = cluster("local-cpu-2core", 2);
  ParallelConfig cfg = config(c, 1, 4, 0, 1, 4, 128);
  cfg.partition = {0, 2, 2, 0};
  validate_config(m, c, cfg);
  EXPECT_EQ(dense_layers_in_chunk(m, cfg, 0, 0), 0);
  EXPECT_EQ(dense_layers_in_chunk(m, cfg, 0, 1), 1);
  EXPECT_EQ(dense_layers_in_chunk(m, cfg, 0, 2), 0);
  const Evaluator ev(m, c, cfg.lora);
  const ConfigContext ctx(ev.context(), cfg);
  const Prediction p = ev.simulate(cfg);
  EXPECT_EQ(p.stages[0].parameters_per_device, static_cast<int64_t>(ctx.embedding_params));
  EXPECT_EQ(p.stages[1].parameters_per_device,
            static_cast<int64_t>(ctx.dense_block_params + ctx.block_params + ctx.expert_params));
  EXPECT_EQ(p.stages[3].parameters_per_device, static_cast<int64_t>(ctx.head_params));
}

TEST(EdgeChunks, AZeroLayerChunkAnywhereElseIsRefused) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 2, 4, 0, 1, 16, 4096);
  cfg.partition = {8, 0, 16, 8};
  const std::string middle = refusal(m, c, cfg);
  EXPECT_EQ(
      middle.rfind("--partition: a chunk of 0 layers is allowed only first (embedding only) or last (head only)", 0),
      0u)
      << middle;
  EXPECT_NE(middle.find("expected >= 1 layer at chunk 1"), std::string::npos) << middle;
  EXPECT_EQ(middle.find('\n'), std::string::npos) << middle;
  // With interleaving the first chunk is chunk 0 of stage 0: stage 1's first chunk may not be empty.
  ParallelConfig inter = config(c, 4, 2, 0, 1, 16, 4096);
  inter.schedule = PipelineSchedule::interleaved;
  inter.virtual_stages = 2;
  inter.partition = {0, 0, 16, 16};
  EXPECT_NE(refusal(m, c, inter).find("at chunk 1"), std::string::npos) << refusal(m, c, inter);
  inter.partition = {16, 16, 0, 0};  // chunk 2 is stage 0's second chunk, not the last
  EXPECT_NE(refusal(m, c, inter).find("at chunk 2"), std::string::npos) << refusal(m, c, inter);
  cfg.partition = {-1, 17, 16, 0};
  EXPECT_EQ(refusal(m, c, cfg), "--partition: expected layer counts >= 0, got -1");
  cfg.partition = {0, 16, 16, 0};
  EXPECT_EQ(refusal(m, c, cfg), "");
}

}  // namespace edge_chunks_test
}  // namespace shardplan::simulator
