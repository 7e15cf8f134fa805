// The step-time bound the search prunes with: below every point it stands for (brute force over
// the inner loops), and a search that prunes with it ranks and fronts exactly what the
// exhaustive one does, over seeded random scenarios and for any thread count.
#include <gtest/gtest.h>

#include <random>

#include "planner/search.hpp"
#include "simulator/errors.hpp"
#include "support/sim_config.hpp"

namespace shardplan::planner {
namespace bound_pruning_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;

// Every (recompute, schedule, chunks, activation offload) variant of `base`, as the search's
// inner loops build them, that validates; each one's estimate must not beat the bound.
void expect_bound_below_points(const sim::ModelSpec& m, const sim::ClusterSpec& cluster, sim::ParallelConfig base,
                               const std::string& what) {
  const sim::Evaluator ev(m, cluster);
  base.recompute = sim::Recompute::none;
  base.schedule = sim::PipelineSchedule::one_f_one_b;
  base.virtual_stages = 1;
  base.offload_activations = false;
  sim::validate_config(m, cluster, base);
  int most = 1;
  for (int v : {2, 3, 4})
    if (base.pp > 1 && m.num_layers % (base.pp * v) == 0 && base.micro_batches() % base.pp == 0) most = v;
  const sim::ConfigContext ctx(ev.context(), base);
  const double bound = ev.step_time_lower_bound(ctx, most);
  ASSERT_GT(bound, 0) << what;
  int checked = 0;
  for (auto rc : {sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full})
    for (auto sched :
         {sim::PipelineSchedule::gpipe, sim::PipelineSchedule::one_f_one_b, sim::PipelineSchedule::interleaved})
      for (int v : {1, 2, 3, 4})
        for (bool off : {false, true}) {
          if ((sched == sim::PipelineSchedule::interleaved) != (v > 1) || v > most) continue;
          sim::ParallelConfig cfg = base;
          cfg.recompute = rc;
          cfg.schedule = sched;
          cfg.virtual_stages = v;
          cfg.offload_activations = off;
          try {
            sim::validate_config(m, cluster, cfg);
          } catch (const sim::InputError&) { continue; }
          const sim::Estimate e = ev.estimate(cfg);
          EXPECT_GE(e.step_s, bound * (1 - 1e-12)) << what << " " << describe(cfg, cluster.nodes);
          ++checked;
        }
  EXPECT_GE(checked, 6) << what;
  // With a zero-bubble schedule in the space the bound is the busiest stage's work alone, below
  // every split-backward point too (recompute none: the schedules refuse it otherwise).
  const double split_bound = ev.step_time_lower_bound(ctx, most, true);
  EXPECT_LE(split_bound, bound * (1 + 1e-12)) << what;
  // DualPipe in the space too: its busiest rank pair, below the zero-bubble bound.
  const double pair_bound = ev.step_time_lower_bound(ctx, most, true, true);
  EXPECT_LE(pair_bound, split_bound * (1 + 1e-12)) << what;
  int split_checked = 0, bidir_checked = 0;
  for (auto sched : {sim::PipelineSchedule::zb1p, sim::PipelineSchedule::zb2p, sim::PipelineSchedule::zbv,
                     sim::PipelineSchedule::vhalf, sim::PipelineSchedule::vmin, sim::PipelineSchedule::dualpipev,
                     sim::PipelineSchedule::dualpipe})
    for (bool off : {false, true}) {
      sim::ParallelConfig cfg = base;
      cfg.schedule = sched;
      cfg.virtual_stages = sim::two_chunks(sched) ? 2 : 1;
      cfg.offload_activations = off;
      try {
        sim::validate_config(m, cluster, cfg);
      } catch (const sim::InputError&) { continue; }
      const sim::Estimate e = ev.estimate(cfg);
      const bool bidir = sim::bidirectional(sched);
      EXPECT_GE(e.step_s, (bidir ? pair_bound : split_bound) * (1 - 1e-12))
          << what << " " << describe(cfg, cluster.nodes);
      ++(bidir ? bidir_checked : split_checked);
    }
  if (base.pp > 1) { EXPECT_GE(split_checked, 4) << what; }
  if (base.pp > 1 && base.pp % 2 == 0 && base.micro_batches() >= 2 * base.pp) { EXPECT_GE(bidir_checked, 1) << what; }
}

TEST(StepTimeBound, BelowEveryPointItStandsFor) {
  using shardplan::testing::cluster;
  using shardplan::testing::config;
  struct Case {
    const char* model;
    const char* hw;
    int nodes, tp, pp, zero, mbs, gbs, seq;
  };
  const Case cases[] = {
      {"llama2-7b", "p4de.24xlarge", 1, 1, 1, 3, 2, 64, 4096},       // FSDP, no pipeline
      {"llama2-70b", "p5.48xlarge", 4, 8, 4, 1, 1, 128, 4096},       // interleaving allowed (80 layers)
      {"gpt3-175b", "p4de.24xlarge", 8, 8, 8, 1, 1, 256, 2048},      // 96 layers, deep pipeline
      {"llama3.1-405b", "p5.48xlarge", 16, 8, 16, 1, 1, 256, 8192},  // 126 layers: an uneven split
      {"mixtral-8x7b", "p5.48xlarge", 2, 2, 2, 2, 1, 64, 4096},      // MoE
      {"gpt-neox-20b", "p4d.24xlarge", 2, 4, 2, 3, 2, 64, 2048},     // ZeRO-3 gathers per micro-batch
  };
  for (const Case& k : cases) {
    const sim::ModelSpec m = sim::load_model(k.model);
    const sim::ClusterSpec c = cluster(k.hw, k.nodes);
    for (bool sp : {false, true}) {
      if (!sp && m.is_moe() && k.tp > 1) continue;  // Megatron-Core's MoE needs SP with TP
      sim::ParallelConfig cfg = config(c, k.tp, k.pp, k.zero, k.mbs, k.gbs, k.seq);
      cfg.sequence_parallel = sp && k.tp > 1;
      if (m.num_layers % k.pp) {
        cfg.partition.assign(static_cast<std::size_t>(k.pp), static_cast<int>(m.num_layers / k.pp));
        for (int i = 0; i < static_cast<int>(m.num_layers % k.pp); ++i)
          ++cfg.partition[static_cast<std::size_t>(i) + 1];
      }
      expect_bound_below_points(m, c, cfg, std::string(k.model) + (sp ? " sp" : ""));
    }
  }
}

struct Scenario {
  sim::ModelSpec model;
  sim::HardwareProfile hw;
  SearchSpace space;
  Constraints constraints;
  SearchOptions options;
  std::string name;
};

Scenario random_scenario(std::mt19937& rng) {
  static const char* models[] = {"llama2-7b", "llama2-13b", "gpt-neox-20b", "mixtral-8x7b", "llama3.1-70b"};
  static const char* hws[] = {"p4de.24xlarge", "p5.48xlarge", "p4d.24xlarge"};
  static const Objective objectives[] = {Objective::throughput, Objective::cost, Objective::memory,
                                         Objective::time_to_train};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Scenario s{sim::load_model(models[pick(5)]), sim::load_hardware(hws[pick(3)]), {}, {}, {}, ""};
  const int top = 1 << pick(3);  // largest node count: 1, 2 or 4
  s.space.node_counts.clear();
  for (int n = 1; n <= top; n *= 2) s.space.node_counts.push_back(n);
  s.space.seq_len = pick(2) ? 4096 : 2048;
  s.space.global_batch_sizes = {16 * top * (1 + pick(2))};
  s.space.micro_batch_sizes = {1, 2, 4};
  if (s.hw.device.has_fp8() && pick(2)) s.space.fp8_recipes = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
  if (s.model.is_moe()) s.space.expert_parallel = {1, 2, 4, 8};
  if (pick(2))  // the zero-bubble schedules with the others (their bound: m max T)
    s.space.schedules = {sim::PipelineSchedule::one_f_one_b, sim::PipelineSchedule::interleaved,
                         sim::PipelineSchedule::zb1p, sim::PipelineSchedule::zb2p, sim::PipelineSchedule::zbv};
  s.options.objective = objectives[pick(4)];
  s.options.train_tokens = 1e9;
  s.options.top_k = 3 + pick(8);
  s.options.threads = 2;
  s.name = s.model.name + " on " + s.hw.name + " <= " + std::to_string(top) + " nodes, " +
           std::to_string(s.space.schedules.size()) + " schedules, objective " + to_string(s.options.objective) +
           ", top " + std::to_string(s.options.top_k);
  return s;
}

void expect_same_answers(const SearchResult& a, const SearchResult& b, const std::string& what) {
  ASSERT_EQ(a.ranked.size(), b.ranked.size()) << what;
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(a.ranked[i].candidate.key, b.ranked[i].candidate.key) << what << " row " << i;
    EXPECT_EQ(a.ranked[i].score, b.ranked[i].score) << what << " row " << i;
    EXPECT_EQ(a.ranked[i].equivalents, b.ranked[i].equivalents) << what << " row " << i;
  }
  ASSERT_EQ(a.pareto.size(), b.pareto.size()) << what;
  for (std::size_t i = 0; i < a.pareto.size(); ++i) EXPECT_EQ(a.pareto[i].key, b.pareto[i].key) << what;
  EXPECT_EQ(a.considered, b.considered) << what;
}

TEST(BoundPruning, SameRankingAndFrontAsTheExhaustiveSearch) {
  std::mt19937 rng(20261129);
  long long outranked = 0;
  for (int i = 0; i < 10; ++i) {
    Scenario s = random_scenario(rng);
    s.options.bound_pruning = false;
    const SearchResult exhaustive = search(s.model, s.hw, s.space, s.constraints, s.options);
    EXPECT_EQ(exhaustive.outranked, 0) << s.name;
    s.options.bound_pruning = true;
    const SearchResult pruned = search(s.model, s.hw, s.space, s.constraints, s.options);
    expect_same_answers(exhaustive, pruned, s.name);
    EXPECT_LE(pruned.evaluated, exhaustive.evaluated) << s.name;
    outranked += pruned.outranked;
  }
  EXPECT_GT(outranked, 0);  // the scenarios exercise the bound, not only the model-state one
}

TEST(BoundPruning, SameAnswersForAnyThreadCount) {
  const sim::ModelSpec m = sim::load_model("llama3.1-70b");
  const sim::HardwareProfile hw = sim::load_hardware("p5.48xlarge");
  SearchSpace s;
  s.node_counts = {1, 2, 4, 8};
  s.global_batch_sizes = {256};
  s.seq_len = 8192;
  s.context_parallel = {1, 2};
  SearchOptions o;
  o.threads = 1;
  const SearchResult one = search(m, hw, s, Constraints{}, o);
  o.threads = 3;
  const SearchResult three = search(m, hw, s, Constraints{}, o);
  EXPECT_GT(one.outranked, 0);
  expect_same_answers(one, three, "llama3.1-70b, 1 vs 3 threads");
}

}  // namespace bound_pruning_test
}  // namespace shardplan::planner

namespace shardplan::planner::bound_pruning_test {

// A node count given twice is searched once: its points would otherwise enter the per-thread lists
// twice under one key, and which thread held the copies changed the merged ranking between runs.
TEST(BoundPruning, ANodeCountGivenTwiceIsSearchedOnce) {
  const sim::ModelSpec m = sim::load_model("gpt-neox-20b");
  const sim::HardwareProfile hw = sim::load_hardware("p5.48xlarge");
  SearchSpace s;
  s.global_batch_sizes = {64};
  s.schedules = {sim::PipelineSchedule::one_f_one_b, sim::PipelineSchedule::zb1p, sim::PipelineSchedule::zbv};
  SearchOptions o;
  o.objective = Objective::cost;
  o.threads = 2;
  s.node_counts = {1, 2};
  const SearchResult once = search(m, hw, s, Constraints{}, o);
  s.node_counts = {2, 1, 1, 2};
  const SearchResult twice = search(m, hw, s, Constraints{}, o);
  expect_same_answers(once, twice, "node counts {1, 2} and {2, 1, 1, 2}");
}

}  // namespace shardplan::planner::bound_pruning_test
