// The memory-controlled V schedules V-Half and V-Min (sail-sg zbv_greedy.py) and DeepSeek's DualPipeV
// in the event simulation, against their references' op lists (docs/split_backward_schedules.md §6,
// replayed from the reference code) and the closed forms of ../shared/README.md §6: peaks
// floor((p+2)/2) and floor((p+4)/3) 1F1B micro-batches, bubbles a half and about two thirds of
// 1F1B's, DualPipeV's bubble (PP/2-1)(F&B+B-3W) and PP+1 activations with 2x parameters per device.
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
namespace v_schedules_test {  // named, not anonymous: the files share a unity-build unit

// p ranks of two chunks, m micro-batches; each chunk's F, B (input gradients) and W.
PipelineInput v_input(PipelineSchedule s, int p, int m, double f, double b, double w, double p2p = 0) {
  PipelineInput in;
  in.stages = p;
  in.micro_batches = m;
  in.schedule = s;
  const bool v = v_shaped(s);
  in.virtual_stages = v ? 2 : 1;
  const auto n = static_cast<std::size_t>(p) * (v ? 2 : 1);
  in.forward_s.assign(n, v ? f : 2 * f);  // a 1F1B stage holds both chunks' layers
  in.backward_s.assign(n, v ? b + w : 2 * (b + w));
  in.weight_grad_s.assign(n, v ? w : 2 * w);
  in.stored_activation_bytes.assign(n, v ? 1.0 : 2.0);
  in.p2p_s = p2p;
  return in;
}

int most_in_flight(const PipelineResult& r) {
  return *std::max_element(r.max_in_flight.begin(), r.max_in_flight.end());
}

TEST(VSchedules, OrdersAreTheReferences) {
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::vhalf, 4, 8, 2, 0)),
            "F0.0 F0.1 F0.2 F0.3 F0.4 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F1.2 B0.0 B1.2 W1.2 F1.3 W0.0 F0.5 B0.1 B1.3 "
            "W1.3 F1.4 W0.1 F0.6 B0.2 B1.4 W1.4 F1.5 W0.2 F0.7 B0.3 B1.5 W1.5 F1.6 B1.6 W1.6 B0.4 W0.3 W0.4 F1.7 "
            "B1.7 B0.5 W1.7 B0.6 W0.5 W0.6 B0.7 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::vhalf, 4, 8, 2, 3)),
            "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 B1.0 W1.0 B0.0 W0.0 F0.3 F1.3 B1.1 W1.1 B0.1 W0.1 F0.4 F1.4 B1.2 W1.2 "
            "B0.2 W0.2 F0.5 F1.5 B1.3 W1.3 B0.3 F0.6 W0.3 F1.6 B1.4 B0.4 W1.4 F0.7 W0.4 F1.7 B1.5 B0.5 B1.6 B0.6 "
            "W1.5 W1.6 B1.7 B0.7 W1.7 W0.5 W0.6 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::vmin, 4, 8, 2, 0)),
            "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 B0.0 W0.0 F0.3 F1.2 B1.2 B0.1 W1.2 W0.1 F0.4 F1.3 B1.3 "
            "B0.2 W1.3 W0.2 F0.5 F1.4 B1.4 B0.3 W1.4 W0.3 F0.6 F1.5 B1.5 B0.4 W1.5 W0.4 F0.7 F1.6 B1.6 B0.5 W1.6 "
            "W0.5 F1.7 B1.7 B0.6 W1.7 W0.6 B0.7 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::vmin, 4, 8, 2, 2)),
            "F0.0 F0.1 F1.0 F1.1 B1.0 W1.0 F0.2 B0.0 W0.0 B1.1 F1.2 W1.1 B0.1 F0.3 W0.1 B1.2 F1.3 W1.2 B0.2 F0.4 "
            "W0.2 B1.3 F1.4 W1.3 B0.3 F0.5 W0.3 B1.4 F1.5 W1.4 B0.4 F0.6 W0.4 B1.5 F1.6 W1.5 B0.5 F0.7 W0.5 B1.6 "
            "F1.7 W1.6 B0.6 W0.6 B1.7 W1.7 B0.7 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::dualpipev, 4, 8, 2, 0)),
            "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F1.2 B1.2 W1.2 F1.3 [F0.7&BW1.3] "
            "[F1.4&BW0.0] BW1.4 [F1.5&BW0.1] BW1.5 [F1.6&BW0.2] BW1.6 [F1.7&BW0.3] BW1.7 B0.4 W0.4 B0.5 W0.5 B0.6 "
            "W0.6 B0.7 W0.7");
  EXPECT_EQ(testing::op_order_text(pipeline_stage_order(PipelineSchedule::dualpipev, 4, 8, 2, 3)),
            "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 F0.4 BW1.0 [F1.4&BW0.0] [F0.5&BW1.1] [F1.5&BW0.1] [F0.6&BW1.2] "
            "[F1.6&BW0.2] [F0.7&BW1.3] [F1.7&BW0.3] BW1.4 BW0.4 BW1.5 BW0.5 B1.6 B0.6 B1.7 B0.7 W1.6 W0.6 W1.7 W0.7");
}

// The worked example of docs/split_backward_schedules.md §3 (p = 4, m = 8, unit times, the pair
// F + B + W long): makespans 53, 59, 54 against 1F1B's 66 on the same ranks (each 1F1B stage both
// chunks' layers), peaks 6, 4, 9 chunk micro-batches against ZBV's 8.
TEST(VSchedules, WorkedExampleAtUnitTimes) {
  const double one_f_one_b = simulate_pipeline(v_input(PipelineSchedule::one_f_one_b, 4, 8, 1, 1, 1)).makespan_s;
  EXPECT_DOUBLE_EQ(one_f_one_b, 48 + 3 * 6);  // (p-1)(T_F+T_B+T_W) of a two-chunk stage
  const std::map<PipelineSchedule, std::pair<double, int>> want{{PipelineSchedule::zbv, {51, 8}},
                                                                {PipelineSchedule::vhalf, {53, 6}},
                                                                {PipelineSchedule::vmin, {59, 4}},
                                                                {PipelineSchedule::dualpipev, {54, 9}}};
  for (const auto& [s, w] : want) {
    const PipelineResult r = simulate_pipeline(v_input(s, 4, 8, 1, 1, 1));
    EXPECT_DOUBLE_EQ(r.makespan_s, w.first) << to_string(s);
    for (double busy : r.stage_busy_s) EXPECT_DOUBLE_EQ(busy, 48.0) << to_string(s);
    for (int k : r.max_in_flight) EXPECT_EQ(k, w.second) << to_string(s);
  }
}

// ZB README (../shared/README.md §6): bubble rates 1F1B β, V-Half β/2, V-Min 2β/3 + O(n); with the
// same work, a bubble at most a half / two thirds of 1F1B's (+ one op for V-Min's O(n)), above ZBV's.
TEST(VSchedules, BubblesAreAHalfAndTwoThirdsOf1F1B) {
  for (auto [p, m] : {std::pair{2, 4}, {3, 6}, {4, 8}, {4, 16}, {6, 12}, {8, 24}, {5, 11}}) {
    const double base = simulate_pipeline(v_input(PipelineSchedule::one_f_one_b, p, m, 1, 1, 1)).bubble_s();
    const double zbv = simulate_pipeline(v_input(PipelineSchedule::zbv, p, m, 1, 1, 1)).bubble_s();
    const double half = simulate_pipeline(v_input(PipelineSchedule::vhalf, p, m, 1, 1, 1)).bubble_s();
    const double min = simulate_pipeline(v_input(PipelineSchedule::vmin, p, m, 1, 1, 1)).bubble_s();
    EXPECT_DOUBLE_EQ(base, 6.0 * (p - 1)) << p;
    EXPECT_LE(half, base / 2) << "p=" << p << " m=" << m;
    EXPECT_LE(min, 2 * base / 3 + 1) << "p=" << p << " m=" << m;
    EXPECT_GE(half, zbv) << "p=" << p << " m=" << m;
    EXPECT_GE(min, half) << "p=" << p << " m=" << m;
  }
}

// arXiv 2405.15362: floor((p+2)/2) and floor((p+4)/3) micro-batches of a 1F1B stage (two chunk
// micro-batches each) against ZBV's p, the most any rank holds from F to W.
TEST(VSchedules, PeaksAreTheControlledMemoryClosedForms) {
  for (int p : {2, 3, 4, 5, 6, 8, 12})
    for (int m : {p, 2 * p + 1, 3 * p}) {
      const int zbv = most_in_flight(simulate_pipeline(v_input(PipelineSchedule::zbv, p, m, 1, 1, 1)));
      const PipelineResult h = simulate_pipeline(v_input(PipelineSchedule::vhalf, p, m, 1, 1, 1));
      const PipelineResult n = simulate_pipeline(v_input(PipelineSchedule::vmin, p, m, 1, 1, 1));
      EXPECT_EQ(zbv, 2 * p);
      EXPECT_EQ(most_in_flight(h), 2 * ((p + 2) / 2)) << "p=" << p << " m=" << m;
      EXPECT_EQ(most_in_flight(n), 2 * ((p + 4) / 3)) << "p=" << p << " m=" << m;
      for (int s = 0; s < p; ++s) {  // the estimate's figure never under any rank's
        EXPECT_LE(h.max_in_flight[static_cast<std::size_t>(s)],
                  in_flight_micro_batches(PipelineSchedule::vhalf, p, s, m, 2));
        EXPECT_LE(n.max_in_flight[static_cast<std::size_t>(s)],
                  in_flight_micro_batches(PipelineSchedule::vmin, p, s, m, 2));
      }
      if (p >= 8) {
        EXPECT_LE(2 * most_in_flight(h), zbv + 4) << p;  // about half of ZBV's
        EXPECT_LE(3 * most_in_flight(n), zbv + 8) << p;  // about a third
      }
    }
}

// DualPipe README (PP = 2p stages on p ranks): bubble (PP/2-1)(F&B+B-3W), B the full backward,
// here F&B = F + B (no overlap gain); PP+1 activations per device.
TEST(VSchedules, DualPipeVBubbleAndPeakFollowItsReadme) {
  struct Times {
    double f, b, w;
  };
  for (auto [p, m] : {std::pair{2, 4}, {3, 6}, {4, 8}, {4, 13}, {8, 16}})
    for (const Times t : {Times{1, 1, 1}, Times{1, 1, 0.3}, Times{1.5, 1.5, 0.5}}) {
      const PipelineResult r = simulate_pipeline(v_input(PipelineSchedule::dualpipev, p, m, t.f, t.b, t.w));
      const double fb = t.f + t.b + t.w, full = t.b + t.w;
      EXPECT_NEAR(r.bubble_s(), (p - 1) * (fb + full - 3 * t.w), 1e-9) << "p=" << p << " m=" << m << " B " << t.b;
      for (int k : r.max_in_flight) EXPECT_EQ(k, 2 * p + 1) << "p=" << p << " m=" << m;
    }
  // Other times: with W <= B the README's figure bounds the simulation from above where B > F and
  // below where B < F; the estimate's closed form sits at or below the simulation, and close.
  for (auto [p, m] : {std::pair{4, 8}, {6, 12}, {3, 7}}) {
    for (const Times t : {Times{1, 1.5, 0.7}, Times{1, 2, 0.5}, Times{1, 0.5, 0.2}, Times{1, 1.2, 0.8}}) {
      const PipelineResult r = simulate_pipeline(v_input(PipelineSchedule::dualpipev, p, m, t.f, t.b, t.w));
      const double bubble = dualpipev_bubble(p, t.f, t.b, t.w), readme = (p - 1) * (t.f + 2 * t.b - t.w);
      EXPECT_LE(bubble, r.bubble_s() + 1e-9) << "p=" << p << " B " << t.b << " W " << t.w;
      EXPECT_GE(bubble, 0.75 * r.bubble_s()) << "p=" << p << " B " << t.b << " W " << t.w;
      EXPECT_EQ(r.bubble_s() <= readme + 1e-9, t.b > t.f) << "p=" << p << " B " << t.b << " W " << t.w;
    }
    // W > B: the W's no longer hide in the cool-down; the closed form stays below.
    const PipelineResult slow_w = simulate_pipeline(v_input(PipelineSchedule::dualpipev, p, m, 0.5, 1, 1.5));
    EXPECT_LE(dualpipev_bubble(p, 0.5, 1, 1.5), slow_w.bubble_s());
  }
}

// Every chunk micro-batch runs F, then its backward (B then W, or one full backward recorded as
// its B and W parts back to back) on every rank; a pair is F + B + W long; the V's dependencies hold.
TEST(VSchedules, EveryChunkMicroBatchRunsOnceInDependencyOrder) {
  for (auto s : {PipelineSchedule::vhalf, PipelineSchedule::vmin, PipelineSchedule::dualpipev})
    for (auto [p, m] : {std::pair{4, 8}, {3, 7}, {2, 5}}) {
      const PipelineResult r = simulate_pipeline(v_input(s, p, m, 0.7, 1.3, 0.9, 0.05));
      ASSERT_EQ(r.events.size(), static_cast<std::size_t>(6 * p * m)) << to_string(s);
      std::map<std::tuple<int, int, int, int>, PipelineEvent> by;  // (rank, chunk, mb, F/B/W)
      for (const auto& e : r.events) {
        const int kind = e.weight ? 2 : e.backward ? 1 : 0;
        EXPECT_TRUE(by.emplace(std::tuple{e.stage, e.chunk, e.micro_batch, kind}, e).second) << "duplicate";
        EXPECT_NEAR(e.end_s - e.start_s, kind == 0 ? 0.7 : kind == 1 ? 1.3 : 0.9, 1e-12);
        EXPECT_TRUE(s == PipelineSchedule::dualpipev || !e.overlapped);
      }
      for (int rank = 0; rank < p; ++rank)
        for (int j = 0; j < m; ++j) {
          for (int c = 0; c < 2; ++c) {
            EXPECT_GE(by.at({rank, c, j, 1}).start_s, by.at({rank, c, j, 0}).end_s - 1e-12);
            EXPECT_GE(by.at({rank, c, j, 2}).start_s, by.at({rank, c, j, 1}).end_s - 1e-12);
          }
          const int up = rank + 1, down = rank - 1;  // chunk 0 runs down the ranks, chunk 1 back up
          if (down >= 0) { EXPECT_GE(by.at({rank, 0, j, 0}).start_s, by.at({down, 0, j, 0}).end_s + 0.05 - 1e-12); }
          if (up < p) {
            EXPECT_GE(by.at({rank, 1, j, 0}).start_s, by.at({up, 1, j, 0}).end_s + 0.05 - 1e-12);
            EXPECT_GE(by.at({rank, 0, j, 1}).start_s, by.at({up, 0, j, 1}).end_s - 1e-12);
          }
        }
    }
}

// Llama 2 7B (32 layers: 8 chunks of 4) over 4 ranks, dp 2, on one p4de node.
ParallelConfig llama7b_v(PipelineSchedule s, int micro_batches = 8) {
  ParallelConfig c;
  c.pp = 4;
  c.dp = 2;
  c.zero_stage = 1;
  c.micro_batch_size = 1;
  c.global_batch_size = 2 * micro_batches;
  c.seq_len = 4096;
  c.schedule = s;
  c.virtual_stages = v_shaped(s) ? 2 : 1;
  return c;
}

// On a model: V-Half and V-Min keep fewer activations than ZBV and step slower; each estimate
// follows its simulation; DualPipeV on PP/2 = 4 devices holds twice the parameters per device of
// 1F1B on PP = 8 devices, and PP+1 = 9 chunk micro-batches.
TEST(VSchedules, OnAModel) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  const Evaluator ev(m, cluster);
  std::map<PipelineSchedule, Prediction> pr;
  for (auto s : {PipelineSchedule::zbv, PipelineSchedule::vhalf, PipelineSchedule::vmin, PipelineSchedule::dualpipev}) {
    ParallelConfig cfg = llama7b_v(s);
    pr[s] = simulate(m, cluster, cfg);
    EXPECT_NEAR(ev.estimate(cfg).step_s, pr[s].time.step_s, 0.05 * pr[s].time.step_s) << to_string(s);
  }
  const auto act = [&](PipelineSchedule s) { return pr[s].stages[1].memory.activations; };
  EXPECT_LT(act(PipelineSchedule::vhalf), act(PipelineSchedule::zbv));
  EXPECT_LT(act(PipelineSchedule::vmin), act(PipelineSchedule::vhalf));
  EXPECT_GE(pr[PipelineSchedule::vmin].time.step_s, pr[PipelineSchedule::vhalf].time.step_s);
  EXPECT_GE(pr[PipelineSchedule::vhalf].time.step_s, pr[PipelineSchedule::zbv].time.step_s);
  for (int k : pr[PipelineSchedule::dualpipev].pipeline.max_in_flight) EXPECT_EQ(k, 9);

  ParallelConfig deep;  // 1F1B over PP = 8 devices: 4 layers a device
  deep.pp = 8;
  deep.zero_stage = 1;
  deep.micro_batch_size = 1;
  deep.global_batch_size = 16;
  deep.seq_len = 4096;
  const Prediction one = simulate(m, cluster, deep);
  const double dual = pr[PipelineSchedule::dualpipev].stages[1].memory.parameters;
  EXPECT_NEAR(dual / one.stages[1].memory.parameters, 2.0, 1e-9);  // middle ranks: 8 layers against 4
}

// Each refusal is one line naming the flag.
TEST(VSchedules, RefusalsNameTheFlag) {
  const ModelSpec llama = load_model("llama2-7b");
  const ClusterSpec cluster{load_hardware("p4de.24xlarge"), 1, 0};
  auto refused = [&](const ModelSpec& m, ParallelConfig cfg, const std::string& flag) {
    try {
      validate_config(m, cluster, cfg);
      ADD_FAILURE() << "expected an InputError naming " << flag;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(flag, 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  refused(llama, llama7b_v(PipelineSchedule::dualpipev, 7), "--global-batch-size");  // m 7 < 2 pp
  ParallelConfig ok = llama7b_v(PipelineSchedule::dualpipev, 8);
  EXPECT_NO_THROW(validate_config(llama, cluster, ok));
  ParallelConfig rc = llama7b_v(PipelineSchedule::vhalf);
  rc.recompute = Recompute::full;
  refused(llama, rc, "--recompute");
  ParallelConfig one_chunk = llama7b_v(PipelineSchedule::vmin);
  one_chunk.virtual_stages = 1;
  refused(llama, one_chunk, "--virtual-stages");
  ParallelConfig gptj = llama7b_v(PipelineSchedule::vmin);  // 28 layers: not 8 chunks of equal size
  gptj.seq_len = 2048;
  refused(load_model("gpt-j-6b"), gptj, "--pp");
  try {
    (void)simulate_pipeline(v_input(PipelineSchedule::dualpipev, 4, 7, 1, 1, 1));
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.micro_batches"), std::string::npos) << e.what();
  }
}

}  // namespace v_schedules_test
}  // namespace shardplan::simulator
