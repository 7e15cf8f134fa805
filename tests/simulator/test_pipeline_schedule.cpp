// Tests of the pipeline-schedule event simulation against the closed forms of Narayanan et al.
// 2021 §2.2, hand-derived op orders and timings, and per-event dependency checks.
#include "simulator/pipeline_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "simulator/errors.hpp"

namespace shardplan::simulator {
namespace pipeline_schedule_test {  // named, not anonymous: the files share a unity-build unit

using Key = std::tuple<int, int, bool>;  // (virtual stage, micro-batch, backward)

PipelineInput uniform(PipelineSchedule s, int p, int m, int v = 1, double tf = 1.0, double tb = 2.0) {
  PipelineInput in;
  in.stages = p;
  in.micro_batches = m;
  in.virtual_stages = v;
  in.schedule = s;
  const auto n = static_cast<std::size_t>(p * v);
  in.forward_s.assign(n, tf);
  in.backward_s.assign(n, tb);
  return in;
}

std::string label(const PipelineInput& in) {
  return std::string(to_string(in.schedule)) + " p=" + std::to_string(in.stages) +
         " m=" + std::to_string(in.micro_batches) + " v=" + std::to_string(in.virtual_stages);
}

// Compact op list of one stage: "F0" / "B3" (v = 1) or "F1.0" = chunk 1, micro-batch 0.
std::vector<std::string> stage_ops(const PipelineResult& r, int stage, bool with_chunk) {
  std::vector<std::string> out;
  for (const PipelineEvent& e : r.events) {
    if (e.stage != stage) continue;
    std::string s = e.backward ? "B" : "F";
    if (with_chunk) s += std::to_string(e.chunk) + ".";
    out.push_back(s + std::to_string(e.micro_batch));
  }
  return out;
}

// Checks every structural property the simulation promises; returns events by key.
std::map<Key, PipelineEvent> check_events(const PipelineInput& in, const PipelineResult& r) {
  const int p = in.stages;
  const int v = in.virtual_stages;
  const int m = in.micro_batches;
  const double eps = 1e-9;
  std::map<Key, PipelineEvent> by_key;
  EXPECT_EQ(r.events.size(), static_cast<std::size_t>(2 * p * v * m)) << label(in);
  int prev_stage = 0;
  double stage_free = 0;
  for (const PipelineEvent& e : r.events) {
    const int vs = e.chunk * p + e.stage;
    EXPECT_TRUE(by_key.emplace(Key{vs, e.micro_batch, e.backward}, e).second) << label(in) << ": duplicate op";
    EXPECT_GE(e.stage, prev_stage) << label(in) << ": events must be stage-major";
    if (e.stage != prev_stage) stage_free = 0;
    prev_stage = e.stage;
    const double dur =
        e.backward ? in.backward_s[static_cast<std::size_t>(vs)] : in.forward_s[static_cast<std::size_t>(vs)];
    EXPECT_NEAR(e.end_s - e.start_s, dur, eps) << label(in);
    EXPECT_GE(e.start_s, stage_free - eps) << label(in) << ": overlapping ops on a stage";
    stage_free = e.end_s;
  }
  // Dependencies, and each op starts as early as its stage and its dependency allow.
  stage_free = 0;
  prev_stage = 0;
  for (const PipelineEvent& e : r.events) {
    if (e.stage != prev_stage) stage_free = 0;
    prev_stage = e.stage;
    const int vs = e.chunk * p + e.stage;
    double ready = 0;
    if (!e.backward && vs > 0) {
      ready = by_key.at({vs - 1, e.micro_batch, false}).end_s + (p > 1 ? in.p2p_s : 0.0);
    } else if (e.backward && vs < p * v - 1) {
      ready = by_key.at({vs + 1, e.micro_batch, true}).end_s + (p > 1 ? in.p2p_s : 0.0);
    } else if (e.backward) {
      ready = by_key.at({vs, e.micro_batch, false}).end_s;  // same stage: no p2p
    }
    EXPECT_GE(e.start_s, ready - eps) << label(in) << ": dependency violated";
    EXPECT_NEAR(e.start_s, std::max(stage_free, ready), eps) << label(in) << ": op started late";
    stage_free = e.end_s;
  }
  return by_key;
}

TEST(PipelineSchedule, UniformBubbleMatchesClosedFormGpipeAnd1F1B) {
  for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (auto [p, m] : {std::pair{2, 1}, {2, 8}, {4, 4}, {4, 16}, {8, 3}, {8, 32}, {16, 64}}) {
      const PipelineInput in = uniform(sched, p, m);
      const PipelineResult r = simulate_pipeline(in);
      check_events(in, r);
      const double ideal = m * (1.0 + 2.0);
      EXPECT_NEAR(r.bubble_s() / ideal, bubble_fraction(sched, p, m, 1), 1e-12) << label(in);
      EXPECT_NEAR(r.makespan_s, (m + p - 1) * 3.0, 1e-12) << label(in);
    }
  }
}

TEST(PipelineSchedule, UniformBubbleMatchesClosedFormInterleaved) {
  for (int v : {2, 3, 4, 8}) {
    for (auto [p, m] : {std::pair{2, 2}, {2, 8}, {4, 4}, {4, 8}, {4, 16}, {8, 8}, {8, 32}}) {
      // Each chunk holds 1/v of the stage's layers.
      const PipelineInput in = uniform(PipelineSchedule::interleaved, p, m, v, 1.0 / v, 2.0 / v);
      const PipelineResult r = simulate_pipeline(in);
      check_events(in, r);
      const double ideal = m * (1.0 + 2.0);
      EXPECT_NEAR(r.bubble_s() / ideal, bubble_fraction(PipelineSchedule::interleaved, p, m, v), 1e-9) << label(in);
    }
  }
}

TEST(PipelineSchedule, ClosedFormValues) {
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::gpipe, 4, 8, 1), 3.0 / 8);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::one_f_one_b, 8, 16, 1), 7.0 / 16);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::interleaved, 8, 16, 4), 7.0 / 64);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::one_f_one_b, 1, 5, 1), 0.0);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::gpipe, 4, 2, 8, 1), 8);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::one_f_one_b, 4, 0, 8, 1), 4);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::one_f_one_b, 4, 3, 8, 1), 1);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::one_f_one_b, 8, 0, 3, 1), 3);
  // Megatron: warmup (4-0-1)*2 + (2-1)*4 = 10, +1.
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::interleaved, 4, 0, 8, 2), 11);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::interleaved, 4, 3, 8, 2), 5);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::interleaved, 4, 0, 4, 2), 8);  // capped
  EXPECT_THROW(in_flight_micro_batches(PipelineSchedule::gpipe, 4, 4, 8, 1), InputError);
  EXPECT_THROW(bubble_fraction(PipelineSchedule::gpipe, 0, 8, 1), InputError);
}

TEST(PipelineSchedule, MaxInFlightMatchesClosedForm) {
  struct Case {
    PipelineSchedule s;
    int p, m, v;
  };
  const std::vector<Case> cases = {
      {PipelineSchedule::gpipe, 4, 8, 1},         {PipelineSchedule::gpipe, 3, 1, 1},
      {PipelineSchedule::one_f_one_b, 4, 8, 1},   {PipelineSchedule::one_f_one_b, 8, 3, 1},
      {PipelineSchedule::one_f_one_b, 16, 64, 1}, {PipelineSchedule::interleaved, 4, 8, 2},
      {PipelineSchedule::interleaved, 4, 4, 2},   {PipelineSchedule::interleaved, 8, 16, 4},
      {PipelineSchedule::interleaved, 2, 2, 3},   {PipelineSchedule::interleaved, 1, 3, 2},
  };
  for (const Case& c : cases) {
    PipelineInput in = uniform(c.s, c.p, c.m, c.v);
    in.stored_activation_bytes.assign(static_cast<std::size_t>(c.p * c.v), 1000.0);
    const PipelineResult r = simulate_pipeline(in);
    ASSERT_EQ(r.max_in_flight.size(), static_cast<std::size_t>(c.p));
    for (int s = 0; s < c.p; ++s) {
      const auto i = static_cast<std::size_t>(s);
      EXPECT_EQ(r.max_in_flight[i], in_flight_micro_batches(c.s, c.p, s, c.m, c.v)) << label(in) << " stage " << s;
      EXPECT_DOUBLE_EQ(r.peak_stored_activation_bytes[i], 1000.0 * r.max_in_flight[i]) << label(in) << " stage " << s;
    }
  }
}

TEST(PipelineSchedule, PeakBytesZeroWithoutSizesAndWeightedPerChunk) {
  PipelineInput in = uniform(PipelineSchedule::gpipe, 2, 3);
  PipelineResult r = simulate_pipeline(in);
  EXPECT_EQ(r.peak_stored_activation_bytes, (std::vector<double>{0.0, 0.0}));
  // Interleaved p=2, v=2, m=2 stage 1 holds F0.0, F0.1, F1.0 before its first backward.
  in = uniform(PipelineSchedule::interleaved, 2, 2, 2);
  in.stored_activation_bytes = {1.0, 10.0, 100.0, 1000.0};  // [chunk * p + stage]
  r = simulate_pipeline(in);
  EXPECT_EQ(r.max_in_flight[1], 3);
  EXPECT_DOUBLE_EQ(r.peak_stored_activation_bytes[1], 10.0 + 10.0 + 1000.0);
  EXPECT_EQ(r.max_in_flight[0], 4);
  EXPECT_DOUBLE_EQ(r.peak_stored_activation_bytes[0], 2 * 1.0 + 2 * 100.0);
}

TEST(PipelineSchedule, OpOrdersMatchHandDerived) {
  PipelineResult r = simulate_pipeline(uniform(PipelineSchedule::one_f_one_b, 3, 4));
  using V = std::vector<std::string>;
  EXPECT_EQ(stage_ops(r, 0, false), (V{"F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"}));
  EXPECT_EQ(stage_ops(r, 1, false), (V{"F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"}));
  EXPECT_EQ(stage_ops(r, 2, false), (V{"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"}));
  r = simulate_pipeline(uniform(PipelineSchedule::gpipe, 2, 3));
  EXPECT_EQ(stage_ops(r, 1, false), (V{"F0", "F1", "F2", "B0", "B1", "B2"}));
  // Megatron interleaved, p=2 v=2 m=4: forwards k -> chunk (k%4)/2, mb (k/4)*2 + k%2;
  // backwards use chunk 1 - that. Stage 1 warmup (2-1-1)*2 + 1*2 = 2.
  r = simulate_pipeline(uniform(PipelineSchedule::interleaved, 2, 4, 2));
  EXPECT_EQ(stage_ops(r, 1, true), (V{"F0.0", "F0.1", "F1.0", "B1.0", "F1.1", "B1.1", "F0.2", "B0.0", "F0.3", "B0.1",
                                      "F1.2", "B1.2", "F1.3", "B1.3", "B0.2", "B0.3"}));
  // Stage 0 warmup min(2 + 2, 8) = 4.
  EXPECT_EQ(stage_ops(r, 0, true), (V{"F0.0", "F0.1", "F1.0", "F1.1", "F0.2", "B1.0", "F0.3", "B1.1", "F1.2", "B0.0",
                                      "F1.3", "B0.1", "B1.2", "B1.3", "B0.2", "B0.3"}));
}

TEST(PipelineSchedule, HandComputedTimingWithP2P) {
  // 1F1B p=2 m=2, F=1 B=2, p2p=0.5. Stage 0: F0[0,1] F1[1,2] B0[5,7] B1[8,10];
  // stage 1: F0[1.5,2.5] B0[2.5,4.5] F1[4.5,5.5] B1[5.5,7.5].
  PipelineInput in = uniform(PipelineSchedule::one_f_one_b, 2, 2);
  in.p2p_s = 0.5;
  const PipelineResult r = simulate_pipeline(in);
  const std::vector<std::pair<double, double>> expect = {{0, 1},     {1, 2},     {5, 7},     {8, 10},
                                                         {1.5, 2.5}, {2.5, 4.5}, {4.5, 5.5}, {5.5, 7.5}};
  ASSERT_EQ(r.events.size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.events[i].start_s, expect[i].first) << i;
    EXPECT_DOUBLE_EQ(r.events[i].end_s, expect[i].second) << i;
  }
  EXPECT_DOUBLE_EQ(r.makespan_s, 10.0);
  EXPECT_EQ(r.stage_end_s, (std::vector<double>{10.0, 7.5}));
  EXPECT_EQ(r.stage_busy_s, (std::vector<double>{6.0, 6.0}));
  EXPECT_DOUBLE_EQ(r.bubble_s(), 4.0);
}

TEST(PipelineSchedule, P2PLatencyIncreasesMakespan) {
  for (const PipelineInput& base :
       {uniform(PipelineSchedule::gpipe, 4, 8), uniform(PipelineSchedule::one_f_one_b, 4, 8),
        uniform(PipelineSchedule::interleaved, 4, 8, 2)}) {
    PipelineInput in = base;
    const double without = simulate_pipeline(in).makespan_s;
    in.p2p_s = 0.25;
    const PipelineResult r = simulate_pipeline(in);
    check_events(in, r);
    EXPECT_GT(r.makespan_s, without) << label(in);
    // A micro-batch crosses p*v - 1 stage boundaries each way.
    EXPECT_GE(r.makespan_s, without + 2 * (4 * in.virtual_stages - 1) * 0.25 - 1e-9) << label(in);
  }
}

TEST(PipelineSchedule, SlowStageDominates) {
  for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    PipelineInput in = uniform(sched, 4, 16);
    in.forward_s[2] = 3.0;
    in.backward_s[2] = 6.0;
    in.p2p_s = 0.1;
    const PipelineResult r = simulate_pipeline(in);
    check_events(in, r);
    EXPECT_GE(r.makespan_s, 16 * (3.0 + 6.0)) << label(in);
    EXPECT_DOUBLE_EQ(r.stage_busy_s[2], 16 * 9.0);
    EXPECT_DOUBLE_EQ(r.stage_busy_s[0], 16 * 3.0);
    EXPECT_GT(r.makespan_s, simulate_pipeline(uniform(sched, 4, 16)).makespan_s);
  }
}

TEST(PipelineSchedule, RandomNonUniformRespectsDependencies) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> t(0.1, 3.0);
  struct Case {
    PipelineSchedule s;
    int p, m, v;
  };
  const std::vector<Case> cases = {
      {PipelineSchedule::gpipe, 5, 7, 1},       {PipelineSchedule::one_f_one_b, 5, 7, 1},
      {PipelineSchedule::one_f_one_b, 6, 2, 1}, {PipelineSchedule::interleaved, 3, 6, 2},
      {PipelineSchedule::interleaved, 4, 4, 3}, {PipelineSchedule::interleaved, 1, 2, 4},
  };
  for (const Case& c : cases) {
    PipelineInput in = uniform(c.s, c.p, c.m, c.v);
    for (double& x : in.forward_s) x = t(rng);
    for (double& x : in.backward_s) x = t(rng);
    in.p2p_s = 0.3;
    const PipelineResult r = simulate_pipeline(in);
    const auto by_key = check_events(in, r);
    for (const auto& [key, e] : by_key) {
      const auto [vs, mb, backward] = key;
      if (backward) {
        EXPECT_GE(e.start_s, by_key.at({vs, mb, false}).end_s) << label(in) << ": B before F";
      } else if (e.stage > 0) {
        EXPECT_GE(e.start_s + 1e-9, by_key.at({vs - 1, mb, false}).end_s + in.p2p_s) << label(in);
      }
    }
    for (int s = 0; s < c.p; ++s) {
      double end = 0;
      for (const PipelineEvent& e : r.events) {
        if (e.stage == s) end = std::max(end, e.end_s);
      }
      EXPECT_DOUBLE_EQ(r.stage_end_s[static_cast<std::size_t>(s)], end);
    }
  }
}

TEST(PipelineSchedule, EveryOrderCompletesOverAGrid) {
  // A deadlocked order would throw SimulatorError; check_events also verifies each op's timing.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> t(0.0, 2.0);  // includes near-zero durations
  for (int p : {1, 2, 3, 5, 8}) {
    for (int v : {1, 2, 3, 5}) {
      for (int k : {1, 2, 3}) {
        const int m = v == 1 ? k * 3 - 2 : k * p;  // 1F1B also with m < p
        for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
          if ((sched == PipelineSchedule::interleaved) != (v > 1)) continue;
          PipelineInput in = uniform(sched, p, m, v);
          for (double& x : in.forward_s) x = t(rng);
          for (double& x : in.backward_s) x = t(rng);
          in.p2p_s = t(rng);
          PipelineResult r;
          ASSERT_NO_THROW(r = simulate_pipeline(in)) << label(in);
          check_events(in, r);
          // The makespan-only run (no events kept) is the same simulation.
          EXPECT_EQ(pipeline_makespan(in), r.makespan_s) << label(in);
        }
      }
    }
  }
}

TEST(PipelineSchedule, SingleStageHasNoBubble) {
  for (const PipelineInput& in : {uniform(PipelineSchedule::gpipe, 1, 5), uniform(PipelineSchedule::one_f_one_b, 1, 5),
                                  uniform(PipelineSchedule::interleaved, 1, 5, 3)}) {
    PipelineInput with_p2p = in;
    with_p2p.p2p_s = 1.0;  // never paid: no stage boundary
    const PipelineResult r = simulate_pipeline(with_p2p);
    EXPECT_DOUBLE_EQ(r.bubble_s(), 0.0) << label(in);
    EXPECT_DOUBLE_EQ(r.makespan_s, in.virtual_stages * 5 * 3.0) << label(in);
  }
}

TEST(PipelineSchedule, InvalidInputThrows) {
  auto throws = [](PipelineInput in) { EXPECT_THROW(simulate_pipeline(in), InputError) << label(in); };
  throws(uniform(PipelineSchedule::interleaved, 4, 6, 2));  // m % p != 0
  throws(uniform(PipelineSchedule::interleaved, 4, 8, 1));  // v < 2
  throws(uniform(PipelineSchedule::one_f_one_b, 4, 8, 2));  // v != 1 outside interleaved
  throws(uniform(PipelineSchedule::gpipe, 4, 8, 2));
  PipelineInput in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.stages = 0;
  throws(in);
  in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.micro_batches = 0;
  throws(in);
  in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.forward_s.pop_back();
  throws(in);
  in = uniform(PipelineSchedule::interleaved, 4, 8, 2);
  in.backward_s.resize(4);
  throws(in);
  in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.stored_activation_bytes = {1.0, 2.0};
  throws(in);
  in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.forward_s[1] = -1.0;
  throws(in);
  in = uniform(PipelineSchedule::one_f_one_b, 4, 8);
  in.p2p_s = -0.5;
  throws(in);
  // The message names the field.
  try {
    simulate_pipeline(uniform(PipelineSchedule::interleaved, 4, 6, 2));
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("micro_batches"), std::string::npos) << e.what();
  }
}

TEST(PipelineSchedule, LargeConfigurationRunsAndMatchesClosedForm) {
  // Planner-scale: p=128, v=8, m=1024 (2M ops) must finish quickly and stay exact.
  const int p = 128, m = 1024, v = 8;
  const PipelineInput in = uniform(PipelineSchedule::interleaved, p, m, v, 1.0 / 8, 2.0 / 8);
  const PipelineResult r = simulate_pipeline(in);
  EXPECT_EQ(r.events.size(), static_cast<std::size_t>(2 * p * m * v));
  EXPECT_NEAR(r.bubble_s() / (m * 3.0), bubble_fraction(in.schedule, p, m, v), 1e-9);
  EXPECT_EQ(r.max_in_flight[0], in_flight_micro_batches(in.schedule, p, 0, m, v));
}

TEST(PipelineSchedule, ToString) {
  EXPECT_STREQ(to_string(PipelineSchedule::gpipe), "gpipe");
  EXPECT_STREQ(to_string(PipelineSchedule::one_f_one_b), "1f1b");
  EXPECT_STREQ(to_string(PipelineSchedule::interleaved), "interleaved");
}

// The executor runs pipeline_stage_order's lists: they must be the orders the simulation times,
// with every (chunk, micro-batch) forward before its backward, and bad input refused.
TEST(PipelineSchedule, StageOrderIsTheSimulatedOrderForEverySchedule) {
  struct Case {
    PipelineSchedule s;
    int p, m, v;
  };
  for (const Case c : {Case{PipelineSchedule::gpipe, 2, 5, 1}, Case{PipelineSchedule::one_f_one_b, 4, 6, 1},
                       Case{PipelineSchedule::interleaved, 2, 4, 2}, Case{PipelineSchedule::interleaved, 4, 8, 3}}) {
    const PipelineResult r = simulate_pipeline(uniform(c.s, c.p, c.m, c.v));
    for (int st = 0; st < c.p; ++st) {
      const auto ops = pipeline_stage_order(c.s, c.p, c.m, c.v, st);
      ASSERT_EQ(ops.size(), static_cast<size_t>(2 * c.m * c.v));
      std::vector<PipelineEvent> events;
      for (const auto& e : r.events)
        if (e.stage == st) events.push_back(e);
      ASSERT_EQ(events.size(), ops.size());
      std::set<std::pair<int, int>> forwarded;
      for (size_t i = 0; i < ops.size(); ++i) {
        EXPECT_EQ(ops[i].chunk, events[i].chunk);
        EXPECT_EQ(ops[i].mb, events[i].micro_batch);
        EXPECT_EQ(ops[i].backward, events[i].backward);
        if (!ops[i].backward) forwarded.insert({ops[i].chunk, ops[i].mb});
        else EXPECT_TRUE(forwarded.count({ops[i].chunk, ops[i].mb})) << "backward before forward";
      }
    }
  }
  EXPECT_THROW(pipeline_stage_order(PipelineSchedule::interleaved, 2, 3, 2, 0), InputError);  // m % p != 0
  EXPECT_THROW(pipeline_stage_order(PipelineSchedule::one_f_one_b, 2, 4, 1, 2), InputError);  // no stage 2
}

// On NCCL (no tags) each ordered stage pair has one link per direction, and its messages match
// in issue order: the sender's sends and the receiver's receives on every link must come in the
// same (virtual stage, micro-batch) order, for every schedule. Virtual stage of local chunk c on
// stage s: c * p + s; activations go vs -> vs + 1, gradients vs + 1 -> vs.
TEST(PipelineSchedule, LinksCarryMessagesInTheSameOrderAtBothEnds) {
  struct Case {
    PipelineSchedule s;
    int p, m, v;
  };
  int links_checked = 0;
  for (const Case c : {Case{PipelineSchedule::gpipe, 2, 5, 1}, Case{PipelineSchedule::gpipe, 4, 3, 1},
                       Case{PipelineSchedule::one_f_one_b, 2, 8, 1}, Case{PipelineSchedule::one_f_one_b, 4, 6, 1},
                       Case{PipelineSchedule::one_f_one_b, 3, 2, 1}, Case{PipelineSchedule::interleaved, 2, 4, 2},
                       Case{PipelineSchedule::interleaved, 2, 6, 3}, Case{PipelineSchedule::interleaved, 4, 8, 3},
                       Case{PipelineSchedule::interleaved, 4, 4, 2}}) {
    const int last_vs = c.p * c.v - 1;
    // (link: activation?, lower stage a) -> sequence of (receiving virtual stage, micro-batch)
    using Seq = std::vector<std::pair<int, int>>;
    std::map<std::pair<bool, int>, Seq> sent, received;
    for (int st = 0; st < c.p; ++st) {
      const int prev = (st + c.p - 1) % c.p;
      for (const PipelineOp& op : pipeline_stage_order(c.s, c.p, c.m, c.v, st)) {
        const int vs = op.chunk * c.p + st;
        if (!op.backward) {
          if (vs > 0) received[{true, prev}].push_back({vs, op.mb});
          if (vs < last_vs) sent[{true, st}].push_back({vs + 1, op.mb});
        } else {
          if (vs < last_vs) received[{false, st}].push_back({vs, op.mb});
          if (vs > 0) sent[{false, prev}].push_back({vs - 1, op.mb});
        }
      }
    }
    ASSERT_EQ(sent.size(), received.size());
    for (const auto& [link, seq] : sent) {
      ASSERT_TRUE(received.count(link));
      EXPECT_EQ(seq, received.at(link)) << to_string(c.s) << " p" << c.p << " m" << c.m << " v" << c.v << " link "
                                        << (link.first ? "activation " : "gradient ") << link.second;
      ++links_checked;
    }
  }
  EXPECT_GT(links_checked, 20);
}

}  // namespace pipeline_schedule_test
}  // namespace shardplan::simulator
