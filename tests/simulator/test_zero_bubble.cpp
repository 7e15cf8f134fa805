// Zero-bubble schedules ZB-H1 (zb1p) and ZB-H2 (zb2p) in the event simulation against the closed
// forms of Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), Table 2 (../shared/README.md
// §6): bubbles (p-1)(T_F+T_B-T_W) and (p-1)(T_F+T_B-2T_W), peaks p and 2p-1 micro-batches; ZB1P's
// bubble a third of 1F1B's at equal times.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "op_order_text.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/pipeline_schedule.hpp"

namespace shardplan::simulator {
namespace zero_bubble_test {  // named, not anonymous: the files share a unity-build unit

// p stages, m micro-batches, each stage F, B (input gradients) and W (weight gradients) long.
PipelineInput split(PipelineSchedule s, int p, int m, double f, double b, double w) {
  PipelineInput in;
  in.stages = p;
  in.micro_batches = m;
  in.schedule = s;
  in.forward_s.assign(static_cast<std::size_t>(p), f);
  in.backward_s.assign(static_cast<std::size_t>(p), b + w);  // the whole backward; W is part of it
  in.weight_grad_s.assign(static_cast<std::size_t>(p), w);
  in.stored_activation_bytes.assign(static_cast<std::size_t>(p), 1.0);
  return in;
}

// When each stage starts its first op and ends its last.
std::vector<std::pair<double, double>> windows(const PipelineResult& r, int p) {
  std::vector<std::pair<double, double>> out(static_cast<std::size_t>(p), {1e300, 0.0});
  for (const PipelineEvent& e : r.events) {
    auto& [start, end] = out[static_cast<std::size_t>(e.stage)];
    start = std::min(start, e.start_s);
    end = std::max(end, e.end_s);
  }
  return out;
}

TEST(ZeroBubble, Zb1pBubbleIsAThirdOf1F1BAtEqualTimes) {
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 12}, {8, 16}, {8, 8}}) {
    PipelineInput one = split(PipelineSchedule::one_f_one_b, p, m, 1, 1, 1);
    const double ideal = 3.0 * m;  // every stage busy m (F + B + W)
    const double bubble_1f1b = simulate_pipeline(one).makespan_s - ideal;
    const double bubble_zb1p = simulate_pipeline(split(PipelineSchedule::zb1p, p, m, 1, 1, 1)).makespan_s - ideal;
    EXPECT_DOUBLE_EQ(bubble_1f1b, 3.0 * (p - 1)) << p << " stages, " << m << " micro-batches";
    EXPECT_DOUBLE_EQ(bubble_zb1p, bubble_1f1b / 3) << p << " stages, " << m << " micro-batches";
  }
}

TEST(ZeroBubble, Zb1pMatchesTheClosedFormAtUnevenTimes) {
  struct Times {
    double f, b, w;
  };
  // The closed form holds while a W fits where a forward would idle (T_W <= T_F); past that the
  // deferred W's queue up and the simulation is longer.
  for (const Times t : {Times{1.0, 1.5, 0.7}, Times{1.0, 1.0, 0.3}, Times{1.2, 1.7, 1.2}})
    for (auto [p, m] : {std::pair{4, 8}, {4, 12}, {6, 12}}) {
      const PipelineResult r = simulate_pipeline(split(PipelineSchedule::zb1p, p, m, t.f, t.b, t.w));
      const double closed = m * (t.f + t.b + t.w) + (p - 1) * (t.f + t.b - t.w);
      EXPECT_NEAR(r.makespan_s, closed, 1e-9) << p << " stages, " << m << " micro-batches, W " << t.w;
    }
  const PipelineResult slow_w = simulate_pipeline(split(PipelineSchedule::zb1p, 4, 8, 0.8, 1.7, 1.2));
  EXPECT_GT(slow_w.makespan_s, 8 * 3.7 + 3 * (0.8 + 1.7 - 1.2));
}

// ZB-H2 needs the optimizer step off the critical path (the paper's post-validation, §4): each
// stage's own window, first op to last, is the period; the first stage's is the closed form.
TEST(ZeroBubble, Zb2pFirstStageWindowMatchesTheClosedForm) {
  struct Times {
    double f, b, w;
  };
  for (const Times t : {Times{1.0, 1.0, 1.0}, Times{1.0, 1.5, 0.9}, Times{1.0, 1.2, 0.8}})
    for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 12}, {6, 12}}) {
      const PipelineResult r = simulate_pipeline(split(PipelineSchedule::zb2p, p, m, t.f, t.b, t.w));
      const auto win = windows(r, p);
      const double closed = m * (t.f + t.b + t.w) + (p - 1) * (t.f + t.b - 2 * t.w);
      EXPECT_NEAR(win[0].second - win[0].first, closed, 1e-9) << p << " stages, " << m << " micro-batches";
      // At equal times no stage idles inside its window: zero bubble.
      if (t.f == t.b && t.b == t.w)
        for (const auto& [start, end] : win) EXPECT_NEAR(end - start, 3.0 * m, 1e-9);
    }
}

TEST(ZeroBubble, PeaksArePAndTwoPMinusOneMicroBatchesOnEveryStage) {
  for (auto sched : {PipelineSchedule::zb1p, PipelineSchedule::zb2p})
    for (auto [p, m] : {std::pair{4, 8}, {4, 12}, {6, 12}, {4, 2}, {4, 5}, {1, 3}}) {
      const PipelineResult r = simulate_pipeline(split(sched, p, m, 1, 1, 1));
      for (int s = 0; s < p; ++s) {
        const int want = in_flight_micro_batches(sched, p, s, m, 1);
        EXPECT_EQ(want, std::min(sched == PipelineSchedule::zb1p ? p : 2 * p - 1, m));
        EXPECT_EQ(r.max_in_flight[static_cast<std::size_t>(s)], want)
            << to_string(sched) << " p=" << p << " m=" << m << " stage " << s;
        // Activations are held until the W: the peak bytes count the same micro-batches.
        EXPECT_DOUBLE_EQ(r.peak_stored_activation_bytes[static_cast<std::size_t>(s)], want);
      }
    }
}

TEST(ZeroBubble, EveryMicroBatchRunsFThenBThenWOnEveryStage) {
  for (auto sched : {PipelineSchedule::zb1p, PipelineSchedule::zb2p})
    for (auto [p, m] : {std::pair{4, 8}, {3, 7}, {5, 3}}) {
      const PipelineResult r = simulate_pipeline(split(sched, p, m, 0.7, 1.3, 0.9));
      ASSERT_EQ(r.events.size(), static_cast<std::size_t>(3 * p * m));
      std::map<std::tuple<int, int, int>, PipelineEvent> by;  // (stage, mb, kind 0 F / 1 B / 2 W)
      for (const auto& e : r.events) {
        const int kind = e.weight ? 2 : e.backward ? 1 : 0;
        EXPECT_TRUE(by.emplace(std::tuple{e.stage, e.micro_batch, kind}, e).second) << "duplicate op";
        EXPECT_NEAR(e.end_s - e.start_s, kind == 0 ? 0.7 : kind == 1 ? 1.3 : 0.9, 1e-12);
      }
      for (int s = 0; s < p; ++s)
        for (int j = 0; j < m; ++j) {
          const auto& f = by.at({s, j, 0});
          const auto& b = by.at({s, j, 1});
          const auto& w = by.at({s, j, 2});
          EXPECT_GE(b.start_s, f.end_s);
          EXPECT_GE(w.start_s, b.end_s);
          if (s > 0) EXPECT_GE(f.start_s, by.at({s - 1, j, 0}).end_s);
          if (s < p - 1) EXPECT_GE(b.start_s, by.at({s + 1, j, 1}).end_s);
        }
      const auto order = pipeline_stage_order(sched, p, m, 1, 0);
      EXPECT_EQ(order.size(), static_cast<std::size_t>(3 * m));
    }
}

TEST(ZeroBubble, AWeightGradientLongerThanTheBackwardIsRefused) {
  PipelineInput in = split(PipelineSchedule::zb1p, 2, 4, 1, 1, 1);
  in.weight_grad_s[1] = 5;  // more than the whole backward (2)
  try {
    (void)simulate_pipeline(in);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight_grad_s"), std::string::npos) << e.what();
  }
}

// A whole model: the chunks' W (their weight-gradient GEMMs) fills the bubble, so ZB1P steps
// faster than 1F1B; each stage holds p micro-batches until their W (1F1B: p - s).
// Llama 2 7B (32 layers) over 4 pipeline stages and dp 2 on one p4de node, 16 micro-batches.
ParallelConfig llama7b_pp4() {
  ParallelConfig base;
  base.pp = 4;
  base.dp = 2;
  base.zero_stage = 1;
  base.micro_batch_size = 1;
  base.global_batch_size = 16;
  base.seq_len = 4096;
  return base;
}

TEST(ZeroBubble, ASimulatedModelStepsFasterAndHoldsPMicroBatchesPerStage) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  const ParallelConfig base = llama7b_pp4();
  ParallelConfig one = base, zb = base, zb2 = base;
  zb.schedule = PipelineSchedule::zb1p;
  zb2.schedule = PipelineSchedule::zb2p;
  const Prediction p1 = simulate(m, cluster, one), pz = simulate(m, cluster, zb), pz2 = simulate(m, cluster, zb2);
  EXPECT_LT(pz.time.step_s, p1.time.step_s);
  EXPECT_LT(pz.pipeline.bubble_s(), p1.pipeline.bubble_s());
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(pz.pipeline.max_in_flight[static_cast<std::size_t>(s)], 4) << "stage " << s;
    EXPECT_EQ(p1.pipeline.max_in_flight[static_cast<std::size_t>(s)], 4 - s) << "stage " << s;
    EXPECT_EQ(pz2.pipeline.max_in_flight[static_cast<std::size_t>(s)], 7) << "stage " << s;
  }
  // The last stage keeps more activations than under 1F1B; the first the same.
  EXPECT_GT(pz.stages.back().memory.activations, p1.stages.back().memory.activations);
  EXPECT_NEAR(pz.stages.front().memory.activations, p1.stages.front().memory.activations,
              1e-9 * p1.stages.front().memory.activations);
  // The estimate's closed form agrees with the event simulation's step within a few per cent.
  const Evaluator ev(m, cluster);
  EXPECT_NEAR(ev.estimate(zb).step_s, pz.time.step_s, 0.05 * pz.time.step_s);
}

// Up to 4p micro-batches the estimate event-simulates ZB2P (its closed form was 4-8 % slow there:
// bench/schedule_estimates), uneven partitions included: it follows the simulation's step.
TEST(ZeroBubble, Zb2pEstimateFollowsTheSimulationOnUnevenStages) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  const Evaluator ev(m, cluster);
  for (const std::vector<int>& partition : {std::vector<int>{}, {7, 9, 9, 7}, {10, 8, 8, 6}}) {
    ParallelConfig zb2 = llama7b_pp4();
    zb2.schedule = PipelineSchedule::zb2p;
    zb2.global_batch_size = 2 * 8;  // 8 micro-batches = 2p
    zb2.partition = partition;
    const Prediction pz2 = simulate(m, cluster, zb2);
    EXPECT_NEAR(ev.estimate(zb2).step_s, pz2.time.step_s, 0.01 * pz2.time.step_s) << partition.size();
  }
}

TEST(ZeroBubble, RecomputeOrOneStageIsRefusedNamingTheFlag) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  ParallelConfig cfg = llama7b_pp4();
  cfg.schedule = PipelineSchedule::zb1p;
  cfg.recompute = Recompute::full;
  try {
    validate_config(m, cluster, cfg);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("--recompute"), std::string::npos) << e.what(); }
  ParallelConfig one_stage;  // validate_config fills defaults: a fresh configuration
  one_stage.dp = 8;
  one_stage.micro_batch_size = 1;
  one_stage.global_batch_size = 16;
  one_stage.schedule = PipelineSchedule::zb1p;
  try {
    validate_config(m, cluster, one_stage);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("--pp >= 2"), std::string::npos) << e.what(); }
}

// ZBV against its reference: rank 0's and rank 3's op lists at p = 4, m = 8 as PyTorch's
// ScheduleZBVZeroBubble generates them (docs/split_backward_schedules.md §6), and the worked
// example at unit times: 48 busy per rank, every rank's span 48 (zero bubble), makespan 51.
TEST(ZeroBubble, ZbvRunsTheReferenceOrderWithZeroBubbleSpans) {
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::zbv, 4, 8, 2, 0)),
            "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F1.2 B1.2 W1.2 F1.3 B1.3 W1.3 F0.7 "
            "B0.0 W0.0 F1.4 B1.4 W1.4 B0.1 W0.1 F1.5 B1.5 W1.5 B0.2 W0.2 F1.6 B1.6 W1.6 B0.3 W0.3 F1.7 B1.7 W1.7 "
            "B0.4 W0.4 B0.5 W0.5 B0.6 W0.6 B0.7 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::zbv, 4, 8, 2, 3)),
            "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 B1.0 W1.0 F0.4 B0.0 W0.0 F1.4 B1.1 W1.1 F0.5 B0.1 W0.1 F1.5 "
            "B1.2 W1.2 F0.6 B0.2 W0.2 F1.6 B1.3 W1.3 F0.7 B0.3 W0.3 F1.7 B1.4 W1.4 B0.4 B1.5 B0.5 B1.6 B0.6 B1.7 "
            "B0.7 W0.4 W1.5 W1.6 W1.7 W0.5 W0.6 W0.7");
  PipelineInput in;
  in.stages = 4;
  in.micro_batches = 8;
  in.virtual_stages = 2;
  in.schedule = PipelineSchedule::zbv;
  in.forward_s.assign(8, 1.0);
  in.backward_s.assign(8, 2.0);
  in.weight_grad_s.assign(8, 1.0);
  in.stored_activation_bytes.assign(8, 1.0);
  const PipelineResult r = simulate_pipeline(in);
  EXPECT_DOUBLE_EQ(r.makespan_s, 51.0);
  for (const auto& [start, end] : windows(r, 4)) EXPECT_DOUBLE_EQ(end - start, 48.0);
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(r.stage_busy_s[static_cast<std::size_t>(s)], 48.0);
    EXPECT_EQ(r.max_in_flight[static_cast<std::size_t>(s)], in_flight_micro_batches(PipelineSchedule::zbv, 4, s, 8, 2))
        << "rank " << s;
  }
  // Small m: the generator pads to 2p - 1 and drops the ops past m; every op still runs once.
  in.micro_batches = 3;
  const PipelineResult small = simulate_pipeline(in);
  EXPECT_EQ(small.events.size(), 4u * 2 * 3 * 3);
}

// ZBV on a model: rank 0 holds the first and the last model chunks (embedding and head), the
// step beats 1F1B's on the same devices, the estimate's closed form follows the simulation.
TEST(ZeroBubble, ZbvPlacesTheHeadOnRankZeroAndBeats1F1B) {
  const ModelSpec m = load_model("llama2-7b");  // 32 layers: 8 chunks of 4
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  const ParallelConfig base = llama7b_pp4();
  ParallelConfig one = base, v = base;
  v.schedule = PipelineSchedule::zbv;
  v.virtual_stages = 2;
  const Prediction p1 = simulate(m, cluster, one), pv = simulate(m, cluster, v);
  EXPECT_LT(pv.time.step_s, p1.time.step_s);
  EXPECT_TRUE(chunk_shape(m, v, 1, 0).head);  // chunk 1 of rank 0: model stage 2p - 1
  EXPECT_FALSE(chunk_shape(m, v, 1, 3).head);
  EXPECT_TRUE(chunk_shape(m, v, 0, 0).embedding);
  // Rank 0 keeps the embedding and the head's parameters; rank 3 neither.
  EXPECT_GT(pv.stages.front().memory.parameters, pv.stages.back().memory.parameters);
  const Evaluator ev(m, cluster);
  EXPECT_NEAR(ev.estimate(v).step_s, pv.time.step_s, 0.05 * pv.time.step_s);

  ParallelConfig one_chunk = v;
  one_chunk.virtual_stages = 1;
  try {
    validate_config(m, cluster, one_chunk);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--virtual-stages"), std::string::npos) << e.what();
  }
}

}  // namespace zero_bubble_test
}  // namespace shardplan::simulator
