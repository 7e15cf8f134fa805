// Tests of auto_partition: the DP optimum against brute force over every composition of L layers
// into `stages` positive parts (each goal, with and without a memory cap), qualitative cases
// (heavy LM-head stage, 1F1B in-flight memory), determinism and input validation.
#include "planner/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "simulator/errors.hpp"

namespace shardplan::planner {
namespace partition_test {  // named, not anonymous: the files share a unity-build unit

using simulator::InputError;

constexpr double kRel = 1e-9;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Every composition of `layers` into `stages` positive parts, in lexicographic order.
// Every split of `layers` over `stages` in lexicographic order, each stage >= 1 layer (the first
// and last >= 0 with `empty_edges`).
std::vector<std::vector<int>> compositions(int layers, int stages, bool empty_edges = false) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  auto least = [&](int s) { return empty_edges && (s == 0 || s == stages - 1) ? 0 : 1; };
  std::function<void(int)> rec = [&](int left) {
    const int s = static_cast<int>(cur.size());
    if (s == stages - 1) {
      if (left < least(s)) return;
      cur.push_back(left);
      out.push_back(cur);
      cur.pop_back();
      return;
    }
    int after = 0;
    for (int i = s + 1; i < stages; ++i) after += least(i);
    for (int n = least(s); n <= left - after; ++n) {
      cur.push_back(n);
      rec(left - n);
      cur.pop_back();
    }
  };
  rec(layers);
  return out;
}

double total(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// The lexicographic key of a split, recomputed here from the per-stage costs (independent of the
// implementation's normalisation): speed (T, M), memory (M, T), blend (B, T, M), then evenness.
struct Key {
  std::vector<double> maxima;
  long long unevenness = 0;
};

Key key_of(const PartitionInput& in, const PartitionResult& r) {
  const auto p = static_cast<double>(in.stages);
  const double layers = static_cast<double>(in.layer_time_s.size());
  Key k;
  for (int n : r.layers_per_stage) {
    const auto d = static_cast<long long>(in.stages) * n - static_cast<long long>(layers);
    k.unevenness += d * d;
  }
  const double t_max = r.max_stage_time_s;
  const double m_max = r.max_stage_bytes;
  if (in.goal == PartitionGoal::speed) k.maxima = {t_max, m_max};
  if (in.goal == PartitionGoal::memory) k.maxima = {m_max, t_max};
  if (in.goal == PartitionGoal::blend) {
    const double t0 = (total(in.layer_time_s) + total(in.stage_extra_time_s)) / p;
    const double m0 = (total(in.layer_state_bytes) + total(in.stage_in_flight) / p * total(in.layer_activation_bytes) +
                       total(in.stage_extra_bytes)) /
                      p;
    const double w = in.memory_weight;
    double b_max = 0;
    for (int s = 0; s < in.stages; ++s) {
      const double b = (t0 > 0 ? (1 - w) * r.stage_time_s[s] / t0 : 0.0) + (m0 > 0 ? w * r.stage_bytes[s] / m0 : 0.0);
      b_max = std::max(b_max, b);
    }
    k.maxima = {b_max, t_max, m_max};
  }
  return k;
}

bool near(double a, double b) { return std::abs(a - b) <= kRel * std::max({1.0, std::abs(a), std::abs(b)}); }

struct Brute {
  bool feasible = false;
  double least_max_bytes = std::numeric_limits<double>::infinity();
  Key best;                // the lexicographic optimum among splits that fit the cap
  std::vector<int> split;  // the lexicographically smallest split attaining it
};

// Brute force: keeps the split with the lexicographically least key (near-equal maxima tie).
Brute brute_force(const PartitionInput& in) {
  Brute out;
  for (const auto& split : compositions(static_cast<int>(in.layer_time_s.size()), in.stages, in.empty_edges)) {
    const PartitionResult r = evaluate_partition(in, split);
    out.least_max_bytes = std::min(out.least_max_bytes, r.max_stage_bytes);
    if (in.memory_cap_bytes > 0 && r.max_stage_bytes > in.memory_cap_bytes) continue;
    const Key k = key_of(in, r);
    bool better = !out.feasible;
    for (std::size_t i = 0; !better && i < k.maxima.size(); ++i) {
      if (near(k.maxima[i], out.best.maxima[i])) continue;
      if (k.maxima[i] > out.best.maxima[i]) break;
      better = true;
    }
    if (!better && std::equal(k.maxima.begin(), k.maxima.end(), out.best.maxima.begin(), near) &&
        k.unevenness < out.best.unevenness) {
      better = true;
    }
    if (better) {  // compositions come in lexicographic order, so the first optimum is kept
      out.feasible = true;
      out.best = k;
      out.split = split;
    }
  }
  return out;
}

// L <= 10, stages <= 5, heterogeneous layers, stage extras and 1F1B in-flight counts (p - s).
// integral = true draws small integers, so sums are exact and ties are frequent.
PartitionInput random_input(std::mt19937& rng, bool integral) {
  std::uniform_int_distribution<int> stages_d(1, 5);
  PartitionInput in;
  in.stages = stages_d(rng);
  const int layers = std::uniform_int_distribution<int>(in.stages, 10)(rng);
  auto draw = [&](double hi) {
    return integral ? static_cast<double>(std::uniform_int_distribution<int>(0, static_cast<int>(hi))(rng))
                    : std::uniform_real_distribution<double>(0.0, hi)(rng);
  };
  for (int l = 0; l < layers; ++l) {
    in.layer_time_s.push_back(draw(9));
    in.layer_state_bytes.push_back(draw(20));
    in.layer_activation_bytes.push_back(draw(6));
  }
  for (int s = 0; s < in.stages; ++s) {
    in.stage_extra_time_s.push_back(draw(s == in.stages - 1 ? 12 : 3));
    in.stage_extra_bytes.push_back(draw(s == 0 ? 30 : 10));
    in.stage_in_flight.push_back(in.stages - s);
  }
  in.memory_weight = integral ? 0.5 : std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return in;
}

std::string describe(const PartitionInput& in, const std::vector<int>& split) {
  std::string s = "L=" + std::to_string(in.layer_time_s.size()) + " p=" + std::to_string(in.stages) +
                  " goal=" + std::to_string(static_cast<int>(in.goal)) + " split=";
  for (int n : split) s += std::to_string(n) + ",";
  return s;
}

void expect_matches_brute_force(const PartitionInput& in, bool full_key) {
  const Brute bf = brute_force(in);
  const PartitionResult r = auto_partition(in);
  ASSERT_EQ(r.feasible, bf.feasible) << describe(in, r.layers_per_stage) << " " << r.reason;
  if (!bf.feasible) {
    EXPECT_TRUE(r.layers_per_stage.empty());
    EXPECT_NE(r.reason.find("memory_cap_bytes"), std::string::npos) << r.reason;
    return;
  }
  ASSERT_EQ(r.layers_per_stage.size(), static_cast<std::size_t>(in.stages));
  EXPECT_EQ(std::accumulate(r.layers_per_stage.begin(), r.layers_per_stage.end(), 0),
            static_cast<int>(in.layer_time_s.size()));
  for (std::size_t s = 0; s < r.layers_per_stage.size(); ++s) {
    const bool edge = s == 0 || s + 1 == r.layers_per_stage.size();
    EXPECT_GE(r.layers_per_stage[s], in.empty_edges && edge ? 0 : 1);
  }
  if (in.memory_cap_bytes > 0) { EXPECT_LE(r.max_stage_bytes, in.memory_cap_bytes); }
  const Key k = key_of(in, r);
  EXPECT_TRUE(near(k.maxima[0], bf.best.maxima[0]))
      << describe(in, r.layers_per_stage) << " primary " << k.maxima[0] << " vs brute force " << bf.best.maxima[0]
      << " (" << describe(in, bf.split) << ")";
  if (!full_key) return;
  for (std::size_t i = 1; i < k.maxima.size(); ++i) {
    EXPECT_TRUE(near(k.maxima[i], bf.best.maxima[i]))
        << describe(in, r.layers_per_stage) << " tie-break " << i << ": " << k.maxima[i] << " vs " << bf.best.maxima[i];
  }
  EXPECT_EQ(k.unevenness, bf.best.unevenness) << describe(in, r.layers_per_stage);
  EXPECT_EQ(r.layers_per_stage, bf.split) << describe(in, r.layers_per_stage);
}

constexpr PartitionGoal kGoals[] = {PartitionGoal::speed, PartitionGoal::memory, PartitionGoal::blend};

TEST(AutoPartition, PrimaryObjectiveMatchesBruteForceOnRandomCases) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 300; ++i) {
    PartitionInput in = random_input(rng, false);
    for (PartitionGoal g : kGoals) {
      in.goal = g;
      expect_matches_brute_force(in, false);
    }
  }
}

TEST(AutoPartition, FullTieBreakOrderMatchesBruteForceOnIntegerCases) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    PartitionInput in = random_input(rng, true);
    for (PartitionGoal g : kGoals) {
      in.goal = g;
      expect_matches_brute_force(in, true);
    }
  }
}

TEST(AutoPartition, MemoryCapFeasibilityMatchesBruteForce) {
  std::mt19937 rng(99);
  int infeasible = 0;
  int feasible = 0;
  for (int i = 0; i < 200; ++i) {
    PartitionInput in = random_input(rng, true);
    const double least = brute_force(in).least_max_bytes;
    // Just below, exactly at and above the smallest achievable max stage memory.
    for (double cap : {least - 1, least, least + 3, least * 1.5}) {
      if (cap <= 0) continue;
      in.memory_cap_bytes = cap;
      for (PartitionGoal g : kGoals) {
        in.goal = g;
        expect_matches_brute_force(in, true);
        (auto_partition(in).feasible ? feasible : infeasible)++;
      }
    }
  }
  EXPECT_GT(feasible, 100);
  EXPECT_GT(infeasible, 100);
}

PartitionInput uniform(int layers, int stages, double time, double state, double act) {
  PartitionInput in;
  in.stages = stages;
  in.layer_time_s.assign(layers, time);
  in.layer_state_bytes.assign(layers, state);
  in.layer_activation_bytes.assign(layers, act);
  in.stage_extra_time_s.assign(stages, 0.0);
  in.stage_extra_bytes.assign(stages, 0.0);
  for (int s = 0; s < stages; ++s) in.stage_in_flight.push_back(stages - s);
  return in;
}

TEST(AutoPartition, InfeasibleCapReasonNamesSmallestAchievableMemory) {
  PartitionInput in = uniform(8, 2, 1.0, 2 * kGiB, 0.0);  // best split 4 + 4 = 8 GiB per stage
  in.memory_cap_bytes = 7.5 * kGiB;
  const PartitionResult r = auto_partition(in);
  EXPECT_FALSE(r.feasible);
  EXPECT_TRUE(r.layers_per_stage.empty());
  EXPECT_EQ(r.reason.find('\n'), std::string::npos);
  EXPECT_NE(r.reason.find("8.00 GiB"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("7.50 GiB"), std::string::npos) << r.reason;
  in.memory_cap_bytes = 8 * kGiB;
  const PartitionResult ok = auto_partition(in);
  EXPECT_TRUE(ok.feasible) << ok.reason;
  EXPECT_EQ(ok.layers_per_stage, (std::vector<int>{4, 4}));
}

TEST(AutoPartition, HeavyLastStageGetsFewerLayers) {
  PartitionInput in = uniform(32, 4, 1.0, 1.0, 0.0);
  in.stage_extra_time_s.back() = 4.0;  // LM head + loss
  in.stage_extra_bytes.back() = 4.0;
  for (PartitionGoal g : kGoals) {
    in.goal = g;
    const PartitionResult r = auto_partition(in);
    ASSERT_TRUE(r.feasible);
    EXPECT_LT(r.layers_per_stage.back(), 8) << describe(in, r.layers_per_stage);
    EXPECT_LT(r.layers_per_stage.back(), r.layers_per_stage.front()) << describe(in, r.layers_per_stage);
  }
  in.goal = PartitionGoal::speed;
  EXPECT_DOUBLE_EQ(auto_partition(in).max_stage_time_s, 9.0);  // 9 + 9 + 9 + (5 + 4)
}

TEST(AutoPartition, SpeedAndMemoryGoalsDifferUnderManyInFlightMicroBatches) {
  // 1F1B with p = 4: stage 0 keeps 4 micro-batches of activations, the last stage 1.
  PartitionInput in = uniform(32, 4, 1.0, 1.0, 2.0);
  in.goal = PartitionGoal::speed;
  const PartitionResult speed = auto_partition(in);
  in.goal = PartitionGoal::memory;
  const PartitionResult memory = auto_partition(in);
  in.goal = PartitionGoal::blend;
  const PartitionResult blend = auto_partition(in);
  EXPECT_EQ(speed.layers_per_stage, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_LT(memory.layers_per_stage.front(), speed.layers_per_stage.front());
  EXPECT_GT(memory.layers_per_stage.back(), speed.layers_per_stage.back());
  EXPECT_LT(memory.max_stage_bytes, speed.max_stage_bytes);
  EXPECT_GT(memory.max_stage_time_s, speed.max_stage_time_s);
  // The blend lies in between on both measures.
  EXPECT_LE(blend.max_stage_time_s, memory.max_stage_time_s);
  EXPECT_LE(blend.max_stage_bytes, speed.max_stage_bytes);
  EXPECT_LE(blend.layers_per_stage.front(), speed.layers_per_stage.front());
}

TEST(AutoPartition, BlendEndpointsMatchSingleGoals) {
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) {
    PartitionInput in = random_input(rng, false);
    in.goal = PartitionGoal::speed;
    const double t = auto_partition(in).max_stage_time_s;
    in.goal = PartitionGoal::memory;
    const double m = auto_partition(in).max_stage_bytes;
    in.goal = PartitionGoal::blend;
    in.memory_weight = 0.0;
    EXPECT_TRUE(near(auto_partition(in).max_stage_time_s, t));
    in.memory_weight = 1.0;
    EXPECT_TRUE(near(auto_partition(in).max_stage_bytes, m));
  }
}

TEST(AutoPartition, EqualCostsGiveTheMostEvenSplit) {
  PartitionInput in = uniform(12, 4, 0.0, 0.0, 0.0);
  EXPECT_EQ(auto_partition(in).layers_per_stage, (std::vector<int>{3, 3, 3, 3}));
  in = uniform(10, 4, 0.0, 0.0, 0.0);  // ties among 2/3 mixes: fewer layers first
  EXPECT_EQ(auto_partition(in).layers_per_stage, (std::vector<int>{2, 2, 3, 3}));
  in = uniform(5, 5, 1.0, 1.0, 1.0);
  EXPECT_EQ(auto_partition(in).layers_per_stage, (std::vector<int>{1, 1, 1, 1, 1}));
  in = uniform(7, 1, 1.0, 1.0, 1.0);
  EXPECT_EQ(auto_partition(in).layers_per_stage, (std::vector<int>{7}));
}

// Embedding-only and head-only chunks: with empty_edges the DP searches splits whose first and last
// stage hold no block, and still matches brute force over every such split, tie-breaks included.
TEST(AutoPartition, EmptyEdgesMatchBruteForce) {
  std::mt19937 rng(20261129);
  int empty = 0;
  for (int i = 0; i < 200; ++i) {
    PartitionInput in = random_input(rng, i % 2 == 0);
    in.empty_edges = true;
    for (PartitionGoal g : kGoals) {
      in.goal = g;
      expect_matches_brute_force(in, i % 2 == 0);
      const PartitionResult r = auto_partition(in);
      if (in.stages > 1 && (r.layers_per_stage.front() == 0 || r.layers_per_stage.back() == 0)) ++empty;
    }
  }
  EXPECT_GT(empty, 0);  // heavy edge extras (embedding, head) do empty them
}

TEST(AutoPartition, AnEmptyMiddleStageIsRefusedAndEmptyEdgesOnlyWhenAllowed) {
  PartitionInput in = uniform(6, 3, 1.0, 1.0, 1.0);
  EXPECT_THROW(evaluate_partition(in, {0, 3, 3}), InputError);
  in.empty_edges = true;
  EXPECT_NO_THROW(evaluate_partition(in, {0, 3, 3}));
  EXPECT_THROW(evaluate_partition(in, {3, 0, 3}), InputError);
}

TEST(AutoPartition, Deterministic) {
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    PartitionInput in = random_input(rng, true);
    in.goal = kGoals[i % 3];
    const PartitionResult a = auto_partition(in);
    const PartitionResult b = auto_partition(in);
    EXPECT_EQ(a.layers_per_stage, b.layers_per_stage);
    EXPECT_EQ(a.stage_time_s, b.stage_time_s);
    EXPECT_EQ(a.stage_bytes, b.stage_bytes);
  }
}

TEST(EvaluatePartition, ComputesStageCosts) {
  PartitionInput in;
  in.stages = 2;
  in.layer_time_s = {1, 2, 3};
  in.layer_state_bytes = {10, 20, 30};
  in.layer_activation_bytes = {1, 1, 2};
  in.stage_extra_time_s = {0.5, 4};
  in.stage_extra_bytes = {100, 200};
  in.stage_in_flight = {2, 1};
  const PartitionResult r = evaluate_partition(in, {1, 2});
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(r.stage_time_s, (std::vector<double>{1.5, 9.0}));
  EXPECT_EQ(r.stage_bytes, (std::vector<double>{100 + 10 + 2 * 1, 200 + 50 + 1 * 3}));
  EXPECT_DOUBLE_EQ(r.max_stage_time_s, 9.0);
  EXPECT_DOUBLE_EQ(r.max_stage_bytes, 253.0);
  in.memory_cap_bytes = 200;
  const PartitionResult capped = evaluate_partition(in, {1, 2});
  EXPECT_FALSE(capped.feasible);
  EXPECT_NE(capped.reason.find("stage 1"), std::string::npos) << capped.reason;
}

void expect_input_error(const std::function<void()>& f, const std::string& field) {
  try {
    f();
    ADD_FAILURE() << "expected InputError naming " << field;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(field), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(AutoPartition, RejectsMalformedInput) {
  const PartitionInput good = uniform(6, 3, 1.0, 1.0, 1.0);
  auto bad = [&](const std::function<void(PartitionInput&)>& edit, const std::string& field) {
    PartitionInput in = good;
    edit(in);
    expect_input_error([&] { auto_partition(in); }, field);
    expect_input_error([&] { evaluate_partition(in, {2, 2, 2}); }, field);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  bad([](PartitionInput& in) { in.stages = 0; }, "stages");
  bad([](PartitionInput& in) { in.stages = 7; }, "layer_time_s");  // L < stages
  bad([](PartitionInput& in) { in.layer_time_s[2] = -1; }, "layer_time_s");
  bad([&](PartitionInput& in) { in.layer_time_s[0] = nan; }, "layer_time_s");
  bad([](PartitionInput& in) { in.layer_state_bytes.pop_back(); }, "layer_state_bytes");
  bad([&](PartitionInput& in) { in.layer_activation_bytes[1] = inf; }, "layer_activation_bytes");
  bad([](PartitionInput& in) { in.stage_extra_time_s.push_back(0); }, "stage_extra_time_s");
  bad([](PartitionInput& in) { in.stage_extra_bytes[0] = -5; }, "stage_extra_bytes");
  bad([](PartitionInput& in) { in.stage_in_flight.clear(); }, "stage_in_flight");
  bad([](PartitionInput& in) { in.memory_weight = 1.5; }, "memory_weight");
  bad([&](PartitionInput& in) { in.memory_weight = nan; }, "memory_weight");
  bad([](PartitionInput& in) { in.memory_cap_bytes = -1; }, "memory_cap_bytes");
  bad([](PartitionInput& in) { in.goal = static_cast<PartitionGoal>(42); }, "goal");

  expect_input_error([&] { evaluate_partition(good, {2, 2}); }, "layers_per_stage");
  expect_input_error([&] { evaluate_partition(good, {3, 3, 0}); }, "layers_per_stage");
  expect_input_error([&] { evaluate_partition(good, {2, 2, 3}); }, "layers_per_stage");
  EXPECT_NO_THROW(auto_partition(good));
  EXPECT_NO_THROW(evaluate_partition(good, {1, 2, 3}));
}

}  // namespace partition_test
}  // namespace shardplan::planner
