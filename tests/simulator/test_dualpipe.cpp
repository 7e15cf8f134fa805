// DeepSeek's bidirectional DualPipe (deepseek-ai/DualPipe dualpipe.py @ 3da1bbe) in the event
// simulation: its op lists against the reference's (replayed with torch stubbed out,
// docs/split_backward_schedules.md §2.6), DualPipeV as its cut in half, the README's bubble
// (PP/2-1)(F&B+B-3W) and PP+1 activations, two copies of every stage on PP devices, the pair's
// gradient sum, and the refusals (odd --pp, an odd or too small micro-batch count).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "op_order_text.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/pipeline_schedule.hpp"

namespace shardplan::simulator {
namespace dualpipe_test {  // named, not anonymous: the files share a unity-build unit

// p ranks of two chunks (`s`: dualpipe or dualpipev), m micro-batches; each chunk's F, B, W.
PipelineInput two_chunk_input(PipelineSchedule s, int p, int m, double f, double b, double w, double p2p = 0) {
  PipelineInput in;
  in.stages = p;
  in.micro_batches = m;
  in.schedule = s;
  in.virtual_stages = 2;
  const auto n = static_cast<std::size_t>(2 * p);
  in.forward_s.assign(n, f);
  in.backward_s.assign(n, b + w);
  in.weight_grad_s.assign(n, w);
  in.stored_activation_bytes.assign(n, 1.0);
  in.p2p_s = p2p;
  return in;
}

// dualpipe.py's step() replayed for p = 4, m = 8 (chunk = the direction: 0 enters at rank 0).
TEST(DualPipe, OrdersAreTheReferences) {
  const char* reference[] = {
      "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 [F0.3&BW1.1] [F1.2&BW0.0] BW1.2 [F1.3&BW0.1] BW1.3 B0.2 W0.2 B0.3 W0.3",
      "F0.0 F1.0 F0.1 F1.1 F0.2 BW1.0 [F1.2&BW0.0] [F0.3&BW1.1] [F1.3&BW0.1] BW1.2 BW0.2 B1.3 B0.3 W1.3 W0.3",
      "F1.0 F0.0 F1.1 F0.1 F1.2 BW0.0 [F0.2&BW1.0] [F1.3&BW0.1] [F0.3&BW1.1] BW0.2 BW1.2 B0.3 B1.3 W0.3 W1.3",
      "F1.0 F1.1 F1.2 F0.0 B0.0 W0.0 F0.1 [F1.3&BW0.1] [F0.2&BW1.0] BW0.2 [F0.3&BW1.1] BW0.3 B1.2 W1.2 B1.3 W1.3"};
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::dualpipe, 4, 8, 2, r)), reference[r])
        << "rank " << r;
}

// The DualPipe README derives DualPipeV by cutting DualPipe in half: with no transfer time the two
// pipelines take the same time, DualPipe over p ranks and m micro-batches, DualPipeV over p / 2
// ranks and m / 2.
TEST(DualPipe, IsDualPipeVCutInHalf) {
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 14}, {8, 16}, {8, 20}})
    for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, {1.0, 1.6, 0.7}, {1.3, 0.8, 0.4}}) {
      const PipelineResult dual = simulate_pipeline(two_chunk_input(PipelineSchedule::dualpipe, p, m, f, b, w));
      const PipelineResult v = simulate_pipeline(two_chunk_input(PipelineSchedule::dualpipev, p / 2, m / 2, f, b, w));
      EXPECT_NEAR(dual.makespan_s, v.makespan_s, 1e-9) << "p=" << p << " m=" << m << " B " << b;
      EXPECT_NEAR(dual.bubble_s(), v.bubble_s(), 1e-9) << "p=" << p << " m=" << m << " B " << b;
    }
}

// DualPipe README (PP = p ranks): bubble (PP/2-1)(F&B+B-3W), B the full backward, here F&B = F + B
// + W (no overlap gain); PP + 1 activations per device; against 1F1B's (PP-1)(F+B) on the same ranks.
TEST(DualPipe, BubbleAndPeakFollowItsReadme) {
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {6, 12}, {8, 16}, {8, 22}})
    for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, {1.0, 1.0, 0.3}, {1.5, 1.5, 0.5}}) {
      const PipelineResult r = simulate_pipeline(two_chunk_input(PipelineSchedule::dualpipe, p, m, f, b, w));
      const double fb = f + b + w, full = b + w;
      EXPECT_NEAR(r.bubble_s(), (p / 2 - 1) * (fb + full - 3 * w), 1e-9) << "p=" << p << " m=" << m;
      EXPECT_NEAR(dualpipe_bubble(p, f, b, w), r.bubble_s(), 1e-9) << "p=" << p << " m=" << m;
      for (int k : r.max_in_flight) EXPECT_EQ(k, p + 1) << "p=" << p << " m=" << m;
      for (int s = 0; s < p; ++s) EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::dualpipe, p, s, m, 2), p + 1);
      if (p > 2) { EXPECT_LT(r.bubble_s(), (p - 1) * (f + full)) << "p=" << p; }  // 1F1B's, per chunk times
    }
}

// Every chunk micro-batch runs F, B and W once on every rank; chunk 0 flows from rank 0 to rank
// p - 1 and chunk 1 back, each hop one p2p late; a backward runs after the next rank's in its
// direction, or after its own forward at the direction's last stage.
TEST(DualPipe, EachDirectionRunsInDependencyOrder) {
  for (auto [p, m] : {std::pair{4, 8}, {6, 14}, {2, 6}}) {
    const double p2p = 0.05;
    const PipelineResult r = simulate_pipeline(two_chunk_input(PipelineSchedule::dualpipe, p, m, 0.7, 1.3, 0.9, p2p));
    ASSERT_EQ(r.events.size(), static_cast<std::size_t>(3 * p * m));
    std::map<std::tuple<int, int, int, int>, PipelineEvent> by;  // (rank, chunk, mb, F/B/W)
    for (const auto& e : r.events) {
      const int kind = e.weight ? 2 : e.backward ? 1 : 0;
      EXPECT_TRUE(by.emplace(std::tuple{e.stage, e.chunk, e.micro_batch, kind}, e).second) << "duplicate";
      EXPECT_NEAR(e.end_s - e.start_s, kind == 0 ? 0.7 : kind == 1 ? 1.3 : 0.9, 1e-12);
    }
    for (int rank = 0; rank < p; ++rank)
      for (int c = 0; c < 2; ++c)
        for (int j = 0; j < m / 2; ++j) {
          const auto at = [&](int s, int kind) { return by.at({s, c, j, kind}); };
          EXPECT_GE(at(rank, 1).start_s, at(rank, 0).end_s - 1e-12);
          EXPECT_GE(at(rank, 2).start_s, at(rank, 1).end_s - 1e-12);
          const int before = c == 0 ? rank - 1 : rank + 1, after = c == 0 ? rank + 1 : rank - 1;
          if (before >= 0 && before < p) { EXPECT_GE(at(rank, 0).start_s, at(before, 0).end_s + p2p - 1e-12); }
          if (after >= 0 && after < p) { EXPECT_GE(at(rank, 1).start_s, at(after, 1).end_s + p2p - 1e-12); }
        }
  }
}

// Llama 2 7B (32 layers) on one p4de node, dp 2.
ParallelConfig llama7b(PipelineSchedule s, int pp, int micro_batches) {
  ParallelConfig c;
  c.pp = pp;
  c.dp = 8 / pp;
  c.zero_stage = 1;
  c.micro_batch_size = 1;
  c.global_batch_size = c.dp * micro_batches;
  c.seq_len = 4096;
  c.schedule = s;
  c.virtual_stages = two_chunks(s) ? 2 : 1;
  return c;
}

// On a model: each rank holds stages r and p - 1 - r, twice 1F1B's parameters and optimizer state on
// the same ranks and as much as DualPipeV on half the ranks (the README's table); p + 1 chunk
// micro-batches in flight; the estimate follows the simulation.
TEST(DualPipe, OnAModel) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  const Evaluator ev(m, cluster);
  ParallelConfig dual_cfg = llama7b(PipelineSchedule::dualpipe, 4, 8);
  ParallelConfig one_cfg = llama7b(PipelineSchedule::one_f_one_b, 4, 8);
  ParallelConfig v_cfg = llama7b(PipelineSchedule::dualpipev, 2, 8);
  const Prediction dual = simulate(m, cluster, dual_cfg), one = simulate(m, cluster, one_cfg),
                   v = simulate(m, cluster, v_cfg);
  const auto& mid = dual.stages[1].memory;
  EXPECT_EQ(dual.stages[1].layers, 16);
  EXPECT_NEAR(mid.parameters / one.stages[1].memory.parameters, 2.0, 1e-9);
  EXPECT_NEAR(mid.optimizer_states / one.stages[1].memory.optimizer_states, 2.0, 1e-9);
  EXPECT_NEAR(mid.parameters, v.stages[1].memory.parameters, 1e-6 * mid.parameters);
  // Both ends of the model on the outer ranks: each holds the embedding and the head.
  EXPECT_TRUE(dual.stages[0].has_embedding && dual.stages[0].has_head && dual.stages[3].has_embedding &&
              dual.stages[3].has_head);
  for (int k : dual.pipeline.max_in_flight) EXPECT_EQ(k, 5);
  EXPECT_NEAR(ev.estimate(dual_cfg).step_s, dual.time.step_s, 0.05 * dual.time.step_s);
}

// Without data parallelism the pair (r, p - 1 - r) still sums its two copies' gradients
// (examples/example_dualpipe.py:167-174): communication 1F1B's step does not have.
TEST(DualPipe, TheTwoCopiesSumTheirGradients) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 4};
  ParallelConfig dual = llama7b(PipelineSchedule::dualpipe, 4, 8), one = llama7b(PipelineSchedule::one_f_one_b, 4, 8);
  for (ParallelConfig* c : {&dual, &one}) {
    c->dp = 1;
    c->zero_stage = 0;
    c->global_batch_size = 8;
  }
  const Prediction d = simulate(m, cluster, dual), o = simulate(m, cluster, one);
  EXPECT_EQ(o.time.dp_total_comm_s, 0.0);
  EXPECT_GT(d.time.dp_total_comm_s, 0.0);
  EXPECT_GT(d.time.dp_exposed_comm_s, 0.0);
}

// Each refusal is one line naming the flag.
TEST(DualPipe, RefusalsNameTheFlag) {
  const ModelSpec llama = load_model("llama2-7b");
  auto refused = [&](int nodes, ParallelConfig cfg, const std::string& flag, const std::string& says) {
    const ClusterSpec cluster{load_hardware("p4de.24xlarge"), nodes, 0};
    try {
      validate_config(llama, cluster, cfg);
      ADD_FAILURE() << "expected an InputError naming " << flag;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(flag, 0), 0u) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  ParallelConfig odd = llama7b(PipelineSchedule::dualpipe, 3, 8);  // 3 nodes: pp 3 x dp 8
  odd.dp = 8;
  odd.global_batch_size = 64;
  refused(3, odd, "--pp", "even");
  refused(1, llama7b(PipelineSchedule::dualpipe, 4, 9), "--global-batch-size", "even");
  refused(1, llama7b(PipelineSchedule::dualpipe, 4, 6), "--global-batch-size", "2 x --pp");
  ParallelConfig rc = llama7b(PipelineSchedule::dualpipe, 4, 8);
  rc.recompute = Recompute::full;
  refused(1, rc, "--recompute", "dualpipe");
  ParallelConfig ok = llama7b(PipelineSchedule::dualpipe, 4, 8);
  EXPECT_NO_THROW(validate_config(llama, ClusterSpec{load_hardware("p4de.24xlarge"), 1, 0}, ok));
  for (auto [p, m, field] : {std::tuple{3, 6, "pipeline.stages"}, {4, 9, "pipeline.micro_batches"}}) {
    try {
      (void)simulate_pipeline(two_chunk_input(PipelineSchedule::dualpipe, p, m, 1, 1, 1));
      ADD_FAILURE() << "expected an InputError for p=" << p << " m=" << m;
    } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what(); }
  }
}

}  // namespace dualpipe_test
}  // namespace shardplan::simulator
