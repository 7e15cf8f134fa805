// The goodput model (simulator/goodput.hpp): properties of Young's and Daly's intervals and of
// the expected wall time, checked over sweeps and against a brute-force scan, plus how the
// simulator feeds it (job MTBF, checkpoint size and writers, profile overrides).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "simulator/goodput.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace goodput_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

constexpr double kHour = 3600;

// The τ in [lo, hi] minimising f, by a log-spaced scan refined around the best point.
template <typename F>
double argmin_scan(F f, double lo, double hi) {
  double best = lo, best_v = std::numeric_limits<double>::infinity();
  for (int round = 0; round < 4; ++round) {
    const int n = 2000;
    for (int i = 0; i <= n; ++i) {
      const double tau = lo * std::pow(hi / lo, static_cast<double>(i) / n);
      const double v = f(tau);
      if (v < best_v) best_v = v, best = tau;
    }
    lo = best / 1.05;
    hi = best * 1.05;
  }
  return best;
}

TEST(Goodput, IntervalGrowsWithMtbfAndCheckpointCost) {
  double prev_young = 0, prev_daly = 0;
  for (double mtbf : {0.5 * kHour, 2 * kHour, 10 * kHour, 100 * kHour, 1e4 * kHour}) {
    const double y = young_interval(60, mtbf), d = daly_interval(60, mtbf);
    EXPECT_GT(y, prev_young) << mtbf;
    EXPECT_GT(d, prev_daly) << mtbf;
    prev_young = y, prev_daly = d;
  }
  EXPECT_GT(daly_interval(120, 10 * kHour), daly_interval(30, 10 * kHour));
  EXPECT_DOUBLE_EQ(daly_interval(3 * kHour, kHour), kHour);  // δ >= 2M: checkpoint every M
}

TEST(Goodput, DalyApproachesYoungWhenCheckpointsAreCheapAgainstMtbf) {
  for (double ratio : {1e-3, 1e-5, 1e-7}) {
    const double mtbf = 24 * kHour, delta = ratio * mtbf;
    const double rel = std::abs(daly_interval(delta, mtbf) / young_interval(delta, mtbf) - 1);
    EXPECT_LT(rel, 2 * std::sqrt(ratio)) << "delta/M = " << ratio;
  }
  // ... and they part when checkpoints are not cheap.
  EXPECT_GT(std::abs(daly_interval(0.2 * kHour, kHour) / young_interval(0.2 * kHour, kHour) - 1), 0.05);
}

TEST(Goodput, YoungMinimisesTheFirstOrderWaste) {
  for (double mtbf : {kHour, 12 * kHour, 500 * kHour}) {
    for (double delta : {5.0, 60.0, 600.0}) {
      const double scanned = argmin_scan([&](double t) { return first_order_waste(t, delta, 120, mtbf); }, 1, 1e8);
      EXPECT_NEAR(scanned / young_interval(delta, mtbf), 1.0, 1e-3) << "M=" << mtbf << " delta=" << delta;
    }
  }
}

TEST(Goodput, DalyIsNearTheOptimumOfTheCompleteModel) {
  for (double mtbf : {kHour, 12 * kHour, 500 * kHour}) {
    for (double delta : {5.0, 60.0, 600.0}) {
      auto wall = [&](double t) { return expected_wall_time(1e6, t, delta, 300, mtbf); };
      const double scanned = argmin_scan(wall, 1, 1e8);
      const double daly = daly_interval(delta, mtbf);
      // The estimate lands where the curve is flat: its wall time is within 0.1 % of the optimum
      // (and the interval itself close to the scanned one).
      EXPECT_LT(wall(daly) / wall(scanned) - 1, 1e-3) << "M=" << mtbf << " delta=" << delta;
      EXPECT_NEAR(daly / scanned, 1.0, 0.05) << "M=" << mtbf << " delta=" << delta;
      // Daly's estimate is at least as good as Young's on the complete model.
      EXPECT_LE(wall(daly), wall(young_interval(delta, mtbf)) * (1 + 1e-12));
    }
  }
}

TEST(Goodput, TendsToOneWithoutFailuresAndFallsWithThem) {
  double prev = 0;
  for (double mtbf : {kHour, 10 * kHour, 1e3 * kHour, 1e6 * kHour, 1e9 * kHour}) {
    const double tau = daly_interval(1, mtbf);
    const double g = goodput(tau, 1, 60, mtbf);
    EXPECT_GT(g, prev);
    EXPECT_LE(g, 1.0);
    prev = g;
  }
  EXPECT_GT(prev, 0.9999);
  // Expected wall time = solve time / goodput, and more than the failure-free time.
  const double solve = 7 * 24 * kHour, tau = 1800, delta = 30, R = 600, M = 8 * kHour;
  EXPECT_NEAR(expected_wall_time(solve, tau, delta, R, M) * goodput(tau, delta, R, M), solve, 1e-6 * solve);
  EXPECT_GT(expected_wall_time(solve, tau, delta, R, M), solve * (1 + delta / tau));
  // Near the first-order estimate when failures are rare (they differ by O((δ/τ)²)).
  EXPECT_NEAR((1 - goodput(tau, delta, R, 1e4 * kHour)) / first_order_waste(tau, delta, R, 1e4 * kHour), 1.0,
              2 * delta / tau);
}

TEST(Goodput, SimulatorUsesJobMtbfCheckpointSizeAndOverrides) {
  const ModelSpec m = load_model("llama2-7b");
  ClusterSpec c8 = cluster("p4de.24xlarge", 8), c16 = cluster("p4de.24xlarge", 16);
  const Prediction p8 = run(m, c8, config(c8, 8, 1, 1, 1, 512, 2048));
  const Prediction p16 = run(m, c16, config(c16, 8, 1, 1, 1, 512, 2048));
  EXPECT_DOUBLE_EQ(p8.goodput.job_mtbf_s, c8.hardware.resilience.node_mtbf_s / 8);
  EXPECT_DOUBLE_EQ(p16.goodput.job_mtbf_s, p8.goodput.job_mtbf_s / 2);
  // bf16 weights + fp32 master and moments of every parameter.
  EXPECT_DOUBLE_EQ(p8.goodput.checkpoint_bytes, 14.0 * static_cast<double>(p8.trainable_parameters));
  EXPECT_EQ(p8.goodput.checkpoint_writers, 8 * 8);  // tp 8 x ZeRO-1 over dp 8
  EXPECT_GE(p8.goodput.interval_steps, 1);
  EXPECT_NEAR(p8.goodput.interval_s, p8.goodput.interval_steps * p8.time.step_s, 1e-9 * p8.goodput.interval_s);
  EXPECT_LT(p16.goodput.goodput, 1.0);

  ClusterSpec flaky = c8;
  flaky.hardware.resilience.node_mtbf_s = 2 * kHour;
  const Prediction pf = run(m, flaky, config(flaky, 8, 1, 1, 1, 512, 2048));
  EXPECT_LT(pf.goodput.goodput, p8.goodput.goodput);
  EXPECT_LT(pf.goodput.interval_steps, p8.goodput.interval_steps);
  ClusterSpec slow_disk = c8;
  slow_disk.hardware.resilience.checkpoint_write_Bps /= 10;
  const Prediction ps = run(m, slow_disk, config(slow_disk, 8, 1, 1, 1, 512, 2048));
  EXPECT_NEAR(ps.goodput.checkpoint_write_s, 10 * p8.goodput.checkpoint_write_s, 1e-9);
  EXPECT_GT(ps.goodput.interval_steps, p8.goodput.interval_steps);

  // LoRA: only the adapters are saved.
  ParallelConfig lora = config(c8, 8, 1, 1, 1, 512, 2048);
  lora.lora.rank = 8;
  lora.lora.targets = {"q_proj", "v_proj"};
  const Prediction pl = run(m, c8, lora);
  EXPECT_LT(pl.goodput.checkpoint_bytes, p8.goodput.checkpoint_bytes / 100);
}

TEST(Goodput, TimeToTrainIncludesFailures) {
  const ModelSpec m = load_model("llama2-7b");
  ClusterSpec c = cluster("p4de.24xlarge", 16);
  c.hardware.resilience.node_mtbf_s = 50 * kHour;
  ParallelConfig cfg = config(c, 8, 1, 1, 1, 512, 2048);
  const Prediction p = simulate(m, c, cfg, TrainingGoal{1e12});
  ASSERT_TRUE(p.train_time_with_failures_s && p.train_time_s);
  EXPECT_NEAR(*p.train_time_with_failures_s, *p.train_time_s / p.goodput.goodput, 1e-9 * *p.train_time_s);
  EXPECT_GT(*p.train_time_with_failures_s, *p.train_time_s);
  ASSERT_TRUE(p.train_cost_with_failures_usd && p.train_cost_usd);
  EXPECT_GT(*p.train_cost_with_failures_usd, *p.train_cost_usd);
}

}  // namespace goodput_test
}  // namespace shardplan::simulator
