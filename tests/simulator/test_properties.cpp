// Monotonicity and sanity properties of the simulator: directions any practitioner would
// expect, checked over sweeps rather than against single figures.
#include <gtest/gtest.h>

#include <vector>

#include <cmath>

#include "simulator/rank_pace.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace properties_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::model_states;
using testing::run;

TEST(Properties, MoreTensorParallelNeverRaisesParameterMemory) {
  const ModelSpec m = load_model("llama2-13b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  double prev = 1e300;
  for (int tp : {1, 2, 4, 8}) {
    const Prediction p = run(m, c, config(c, tp, 1, 0, 1, 8, 2048));
    EXPECT_LE(p.worst.parameters, prev) << "tp=" << tp;
    if (tp > 1) { EXPECT_LT(p.worst.parameters, prev); }
    prev = p.worst.parameters;
  }
}

TEST(Properties, MorePipelineStagesLowerPerDeviceModelStates) {
  const ModelSpec m = load_model("llama2-13b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  double prev = 1e300;
  for (int pp : {1, 2, 4, 8}) {
    const Prediction p = run(m, c, config(c, 1, pp, 0, 1, 8 * 8, 2048));
    EXPECT_LT(model_states(p.worst), prev) << "pp=" << pp;
    prev = model_states(p.worst);
  }
}

TEST(Properties, LargerMicroBatchNeverLowersActivations) {
  const ModelSpec m = load_model("gpt-neox-20b");
  const ClusterSpec c = cluster("p4de.24xlarge", 2);
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    double prev = 0;
    for (int mbs : {1, 2, 4, 8}) {
      ParallelConfig cfg = config(c, 4, 2, 1, mbs, 64, 2048);
      cfg.recompute = r;
      const Prediction p = run(m, c, cfg);
      EXPECT_GE(p.worst.activations, prev) << to_string(r) << " mbs=" << mbs;
      prev = p.worst.activations;
    }
  }
}

TEST(Properties, HigherZeroStageNeverRaisesModelStates) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 2);
  double prev = 1e300;
  for (int z = 0; z <= 3; ++z) {
    const Prediction p = run(m, c, config(c, 1, 1, z, 1, 16, 4096));
    EXPECT_LT(model_states(p.worst), prev) << "zero=" << z;
    prev = model_states(p.worst);
  }
}

TEST(Properties, RecomputeTradesMemoryForTime) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  Prediction prev;
  bool first = true;
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    ParallelConfig cfg = config(c, 2, 1, 1, 2, 32, 4096);
    cfg.recompute = r;
    cfg.attention = AttentionKind::eager;  // under flash selective has nothing to drop (== none)
    const Prediction p = run(m, c, cfg);
    if (!first) {
      EXPECT_LT(p.worst.activations, prev.worst.activations) << to_string(r);
      EXPECT_GT(p.time.step_s, prev.time.step_s) << to_string(r);
      EXPECT_GT(p.hardware_flops_per_step, prev.hardware_flops_per_step);
      EXPECT_DOUBLE_EQ(p.model_flops_per_step, prev.model_flops_per_step);  // MFU ignores recompute
    }
    prev = p;
    first = false;
  }
}

TEST(Properties, SequenceParallelShrinksActivations) {
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec c = cluster("p4de.24xlarge", 8);
  ParallelConfig cfg = config(c, 8, 8, 1, 1, 64, 2048);
  const Prediction a = run(m, c, cfg);
  cfg.sequence_parallel = true;
  const Prediction b = run(m, c, cfg);
  EXPECT_LT(b.worst.activations, a.worst.activations);
}

TEST(Properties, OffloadMovesStateToHost) {
  const ModelSpec m = load_model("llama2-13b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 2, 1, 8, 2048);
  const Prediction on_device = run(m, c, cfg);
  cfg.offload_optimizer = true;
  const Prediction offloaded = run(m, c, cfg);
  EXPECT_EQ(offloaded.worst.optimizer_states, 0);
  // ZeRO-Offload keeps fp32 master + moments (12Ψ) and the fp32 gradients (4Ψ) on the host.
  const double psi = static_cast<double>(count_parameters(m).total);
  EXPECT_NEAR(offloaded.host_bytes_per_node, 8 * on_device.worst.optimizer_states + 4 * psi, 1e-6 * psi);
  EXPECT_NEAR(offloaded.host_bytes_per_node, 16 * psi, 1e-6 * psi);
  EXPECT_GT(offloaded.time.optimizer_s, on_device.time.optimizer_s);  // host memory is slower
}

TEST(Properties, BreakdownAddsUpAndThroughputIsConsistent) {
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec c = cluster("p4de.24xlarge", 16);
  ParallelConfig cfg = config(c, 8, 4, 1, 1, 1536, 2048);
  cfg.schedule = PipelineSchedule::interleaved;
  cfg.virtual_stages = 3;
  cfg.recompute = Recompute::selective;
  cfg.sequence_parallel = true;
  const Prediction p = run(m, c, cfg);
  const auto& t = p.time;
  const double sum = t.forward_compute_s + t.backward_compute_s + t.recompute_s + t.tp_comm_s + t.pipeline_bubble_s +
                     t.dp_exposed_comm_s + t.offload_exposed_s + t.optimizer_s;
  EXPECT_NEAR(sum, t.step_s, 1e-9 * t.step_s);
  EXPECT_NEAR(p.tokens_per_s * t.step_s, 1536.0 * 2048, 1e-6);
  EXPECT_GT(p.mfu, 0.05);
  EXPECT_LT(p.mfu, 1.0);
  EXPECT_GT(t.pipeline_bubble_s, 0);
  EXPECT_GT(t.tp_comm_s, 0);
  EXPECT_GT(t.pp_p2p_s, 0);
}

TEST(Properties, InterleavingShrinksTheBubble) {
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec c = cluster("p4de.24xlarge", 16);
  ParallelConfig cfg = config(c, 8, 8, 1, 1, 512, 2048);
  const Prediction plain = run(m, c, cfg);
  cfg.schedule = PipelineSchedule::interleaved;
  cfg.virtual_stages = 2;
  const Prediction inter = run(m, c, cfg);
  EXPECT_LT(inter.time.pipeline_bubble_s, plain.time.pipeline_bubble_s);
  EXPECT_GT(inter.worst.activations, plain.worst.activations);  // (1 + (p-1)/(pv)) more in flight
}

TEST(Properties, FasterNetworkNeverSlowsMultiNodeDataParallel) {
  const ModelSpec m = load_model("llama2-7b");
  ClusterSpec slow = cluster("p4d.24xlarge", 4);
  ClusterSpec fast = slow;
  fast.hardware.network.bandwidth_Bps *= 8;
  const ParallelConfig cfg = config(slow, 1, 1, 1, 1, 32, 2048);
  const Prediction a = run(m, slow, cfg), b = run(m, fast, cfg);
  EXPECT_LT(b.time.dp_total_comm_s, a.time.dp_total_comm_s);
  EXPECT_LE(b.time.step_s, a.time.step_s);
}

TEST(Properties, MemoryFitsVerdictUsesHeadroom) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 2048);
  const Prediction p = run(m, c, cfg);
  ASSERT_TRUE(p.feasible);
  cfg.memory_headroom = 1.0 - 0.99 * p.worst.total() / p.device_capacity_bytes;
  const Prediction tight = run(m, c, cfg);
  EXPECT_FALSE(tight.feasible);
  EXPECT_NE(tight.infeasible_reason.find("stage 0"), std::string::npos);
}

TEST(Properties, EstimateAgreesWithFullSimulation) {
  struct Case {
    const char* model;
    const char* hw;
    int nodes, tp, pp, zero, mbs, gbs, seq;
  };
  const Case cases[] = {{"llama2-7b", "p4de.24xlarge", 1, 1, 1, 1, 1, 64, 4096},
                        {"gpt3-175b", "p4de.24xlarge", 16, 8, 8, 1, 1, 512, 2048},
                        {"llama2-70b", "gaudi2-hls2", 1, 1, 1, 3, 1, 8, 4096},
                        {"gpt-neox-20b", "p5.48xlarge", 2, 4, 4, 1, 2, 64, 2048},
                        // An uneven split: 96 layers over 64 stages, 1 or 2 each.
                        {"gpt3-175b", "p4de.24xlarge", 8, 1, 64, 1, 1, 64, 2048}};
  for (const auto& k : cases) {
    const ModelSpec m = load_model(k.model);
    const ClusterSpec c = cluster(k.hw, k.nodes);
    ParallelConfig cfg = config(c, k.tp, k.pp, k.zero, k.mbs, k.gbs, k.seq);
    const int layers = static_cast<int>(m.num_layers);
    if (layers % k.pp != 0)  // uneven: one more layer on every other stage until they run out
      for (int s = 0, extra = layers % k.pp; s < k.pp; ++s)
        cfg.partition.push_back(layers / k.pp + (s % 2 == 1 && extra-- > 0 ? 1 : 0));
    validate_config(m, c, cfg);
    const Evaluator ev(m, c, cfg.lora);
    const Estimate e = ev.estimate(cfg);
    const Prediction p = ev.simulate(cfg);
    EXPECT_NEAR(e.worst_memory_bytes, p.worst.total(), 0.01 * p.worst.total()) << k.model;
    EXPECT_NEAR(e.step_s, p.time.step_s, 0.03 * p.time.step_s) << k.model;
    EXPECT_EQ(e.fits, p.feasible) << k.model;
  }
}

// A pipeline whose data-parallel reduction outlasts the last backward, with a heavier first stage:
// stage 0 finishes last (1F1B), so its reduction is the exposed one; the closed form's makespan
// for uneven stages, (m - 1) max T + sum T, is at or above the event simulation's, so the
// estimate may run long but must not undercut it (it did while it gave stage 0 the most slack).
TEST(Properties, EstimateOfAnUnevenPipelineDoesNotUndercutTheEventSimulation) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4d.24xlarge", 4);
  ParallelConfig cfg = config(c, 1, 4, 0, 1, 32, 2048);  // dp 8 across the nodes (tp-pp-dp)
  cfg.rank_order = "tp-pp-dp";
  cfg.partition = {9, 8, 8, 7};
  validate_config(m, c, cfg);
  const Evaluator ev(m, c, cfg.lora);
  const Estimate e = ev.estimate(cfg);
  const Prediction p = ev.simulate(cfg);
  ASSERT_GT(p.time.dp_exposed_comm_s, 0.2 * p.time.step_s);  // the tail matters here
  EXPECT_GE(e.step_s, 0.99 * p.time.step_s);
  EXPECT_LE(e.step_s, 1.10 * p.time.step_s);
}

TEST(Properties, TimeToTrainAndCostScaleWithTokens) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 64, 4096);
  const Prediction p1 = simulate(m, c, cfg, TrainingGoal{1e9});
  const Prediction p2 = simulate(m, c, cfg, TrainingGoal{2e9});
  ASSERT_TRUE(p1.train_time_s && p1.train_cost_usd);
  EXPECT_NEAR(*p2.train_time_s, 2 * *p1.train_time_s, 1e-9 * *p2.train_time_s);
  EXPECT_NEAR(*p1.train_cost_usd, *p1.train_time_s / 3600 * c.hardware.price.usd_per_hour, 1e-6);
}

// compute_overlap is the fraction of DP/ZeRO communication that may hide behind compute: with 0
// (CPU ranks under MPI) all of it is exposed and the step is longer; with 1 some of it hides.
TEST(Properties, ComputeOverlapDecidesHowMuchZeroCommunicationHides) {
  const ModelSpec m = load_model("llama2-7b");
  ClusterSpec c = cluster("p4d.24xlarge", 1);
  for (int zero : {0, 2, 3}) {
    c.hardware.node.intra.compute_overlap = 1.0;
    const Prediction hidden = run(m, c, config(c, 1, 1, zero, 1, 16, 2048));
    c.hardware.node.intra.compute_overlap = 0.0;
    const Prediction exposed = run(m, c, config(c, 1, 1, zero, 1, 16, 2048));
    EXPECT_LT(hidden.time.dp_exposed_comm_s, hidden.time.dp_total_comm_s) << "zero " << zero;
    EXPECT_NEAR(exposed.time.dp_exposed_comm_s, exposed.time.dp_total_comm_s, 1e-9 * exposed.time.dp_total_comm_s)
        << "zero " << zero;
    EXPECT_GT(exposed.time.step_s, hidden.time.step_s) << "zero " << zero;
  }
}

// The measured skew: every second of a multi-rank step's compute waits for the slowest rank, skew
// x compute, scaled by E[max of n normals] / E[max of 2] for the largest group the step
// synchronises. One rank never waits; data parallelism below ZeRO-2, which synchronises once a
// step, pays on its forward and every micro-batch too (a rank behind stays behind).
TEST(Properties, SyncSkewChargesTheComputeBetweenCollectives) {
  const ModelSpec m = load_model("llama2-7b");
  ClusterSpec c = cluster("p4d.24xlarge", 1);
  c.hardware.node.intra.sync_skew_fraction = 0.05;
  auto compute = [](const TimeBreakdown& t) { return t.forward_compute_s + t.backward_compute_s + t.recompute_s; };
  ClusterSpec one = c;
  one.devices_per_node = 1;
  EXPECT_EQ(run(m, one, config(one, 1, 1, 0, 1, 8, 2048)).time.sync_wait_s, 0.0);
  const double e2 = 0.5642, e4 = 1.0294, e8 = 1.4236;                // E[max of n standard normals]
  const Prediction tp2 = run(m, c, config(c, 2, 1, 0, 1, 4, 2048));  // with dp 4 below ZeRO-2
  const Prediction tp8 = run(m, c, config(c, 8, 1, 0, 1, 4, 2048));
  EXPECT_NEAR(tp8.time.sync_wait_s, 0.05 * (e8 / e2) * compute(tp8.time), 1e-9 * tp8.time.step_s);
  // The tp pairs wait every layer, and the step's all-reduce over the 4 replicas for the slowest.
  EXPECT_NEAR(tp2.time.sync_wait_s, 0.05 * (e4 / e2) * compute(tp2.time), 1e-9 * tp2.time.step_s);
  ParallelConfig dp = config(c, 1, 1, 1, 1, 32, 2048);  // dp 8, ZeRO-1, 4 micro-batches
  const Prediction z1 = run(m, c, dp);
  EXPECT_NEAR(z1.time.sync_wait_s, 0.05 * (e8 / e2) * compute(z1.time), 1e-9 * z1.time.step_s);
  c.hardware.node.intra.sync_skew_fraction = 0;
  EXPECT_EQ(run(m, c, dp).time.sync_wait_s, 0.0);
  EXPECT_LT(run(m, c, dp).time.step_s, z1.time.step_s);
}

// The kernels are the slowest profiled rank's: a one-rank job runs at the mean rank's pace, so its
// compute and optimizer step shrink by (1 + g/2) / (1 + g) on a two-rank profile with gap g; a
// job on both ranks keeps the kernels as they are, and so does any job without a measured gap.
TEST(Properties, AJobOnFewerCoresThanProfiledRunsAtItsOwnSlowestRanksPace) {
  const ModelSpec m = load_model("tiny-llama");
  ClusterSpec c = cluster("local-cpu-2core", 1);
  ClusterSpec one = c;
  one.devices_per_node = 1;
  const ParallelConfig single = config(one, 1, 1, 0, 4, 4, 128), pair = config(c, 1, 1, 0, 4, 8, 128);
  const Prediction single0 = run(m, one, single), pair0 = run(m, c, pair);
  auto compute = [](const TimeBreakdown& t) { return t.forward_compute_s + t.backward_compute_s + t.recompute_s; };
  const double g = 0.2;
  for (ClusterSpec* cs : {&c, &one}) {
    cs->hardware.node.intra.rank_speed_gap_fraction = g;
    cs->hardware.node.intra.rank_speed_gap_ranks = 2;
  }
  const Prediction single_g = run(m, one, single), pair_g = run(m, c, pair);
  const double pace = (1 + g / 2) / (1 + g);
  EXPECT_NEAR(compute(single_g.time), pace * compute(single0.time), 1e-9 * single0.time.step_s);
  EXPECT_NEAR(single_g.time.optimizer_s, pace * single0.time.optimizer_s, 1e-12);
  EXPECT_LT(single_g.time.step_s, single0.time.step_s);
  EXPECT_DOUBLE_EQ(pair_g.time.step_s, pair0.time.step_s);
  EXPECT_DOUBLE_EQ(rank_pace(g, 2, 1), pace);
  EXPECT_DOUBLE_EQ(rank_pace(g, 2, 2), 1.0);
  EXPECT_DOUBLE_EQ(rank_pace(0.0, 8, 1), 1.0);
  // More of the node's ranks: the expected slowest of k rises to the slowest profiled at k = n.
  double last = 0;
  for (int k = 1; k <= 8; ++k) {
    const double p = rank_pace(g, 8, k);
    EXPECT_GT(p, last) << k;
    EXPECT_LE(p, 1.0) << k;
    last = p;
  }
  EXPECT_DOUBLE_EQ(last, 1.0);
}

// A measured op cost is what the op costs: raising dropout's seconds per element by `extra`
// adds extra x (every dropout element of a micro-batch) to forward and to backward, counted
// here from the model's shapes: attention probabilities and two residual branches per block,
// and the embedding output (Megatron's dropout sites).
TEST(Properties, MeasuredOpCostsAreChargedPerElement) {
  const ModelSpec m = load_model("tiny-gpt");
  ClusterSpec c = cluster("local-cpu-2core", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 4, 8, 128);  // dp 2, 1 micro-batch per rank
  cfg.attention = AttentionKind::eager;                // attention dropout is its own op only in the explicit path
  auto with_dropout_cost = [&](double s_per_element) {
    OpCost& d = c.hardware.device.op_costs[static_cast<int>(cfg.precision)][static_cast<int>(OpKind::dropout)];
    d.forward_s_per_element = {{3.0, 7.0}, {s_per_element, s_per_element}};
    d.backward_s_per_element = {{3.0, 7.0}, {s_per_element / 4, s_per_element / 4}};
    return run(m, c, cfg).time;
  };
  const double b = cfg.micro_batch_size, S = cfg.seq_len, M = b * S;
  const double elements = m.num_layers * (b * m.num_heads * S * S + 2 * M * m.hidden) + M * m.hidden;
  const TimeBreakdown base = with_dropout_cost(1e-9), dearer = with_dropout_cost(5e-9);
  EXPECT_NEAR(dearer.forward_compute_s - base.forward_compute_s, elements * 4e-9, 1e-9);
  EXPECT_NEAR(dearer.backward_compute_s - base.backward_compute_s, elements * 1e-9, 1e-9);
  // Without a measured cost the op falls back on the memory roofline: cheaper on a CPU.
  c.hardware.device.op_costs = {};
  EXPECT_LT(run(m, c, cfg).time.forward_compute_s, base.forward_compute_s);
}

// With a measured weight-cast cost, autocast pays a cast per linear weight in forward and in
// backward; master weights pay none there, only the optimizer's two casts of its shard.
TEST(Properties, WeightCastsAreChargedByTheMixedPrecisionRecipe) {
  const ModelSpec m = load_model("tiny-gpt");
  ClusterSpec c = cluster("local-cpu-2core", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 4, 8, 128);
  cfg.precision = Precision::bf16;
  OpCost& adamw = c.hardware.device.op_costs[static_cast<int>(Precision::fp32)][static_cast<int>(OpKind::adamw)];
  adamw.forward_s_per_element = {{3.0, 7.0}, {5e-9, 5e-9}};
  auto with_cast_cost = [&](MixedPrecision recipe, double s_per_element) {
    OpCost& w = c.hardware.device.op_costs[static_cast<int>(Precision::bf16)][static_cast<int>(OpKind::weight_cast)];
    w.forward_s_per_element = {{3.0, 7.0}, {s_per_element, s_per_element}};
    w.backward_s_per_element = {{3.0, 7.0}, {s_per_element, s_per_element}};
    cfg.mixed_precision = recipe;
    return run(m, c, cfg).time;
  };
  const double linear_weights = m.num_layers * (4.0 * m.hidden * m.hidden + 2.0 * m.hidden * m.ffn_hidden) +
                                static_cast<double>(m.hidden) * m.vocab_size;  // blocks + LM head
  const TimeBreakdown a1 = with_cast_cost(MixedPrecision::autocast, 1e-9);
  const TimeBreakdown a2 = with_cast_cost(MixedPrecision::autocast, 3e-9);
  const double micro_batches = cfg.global_batch_size / (cfg.micro_batch_size * cfg.dp);
  EXPECT_NEAR((a2.forward_compute_s - a1.forward_compute_s) / micro_batches, linear_weights * 2e-9, 1e-9);
  EXPECT_NEAR(a2.optimizer_s, a1.optimizer_s, 1e-12);
  const TimeBreakdown m1 = with_cast_cost(MixedPrecision::master_weights, 1e-9);
  const TimeBreakdown m2 = with_cast_cost(MixedPrecision::master_weights, 3e-9);
  EXPECT_NEAR(m2.forward_compute_s, m1.forward_compute_s, 1e-12);
  EXPECT_GT(m2.optimizer_s, m1.optimizer_s);
}

}  // namespace properties_test
}  // namespace shardplan::simulator
