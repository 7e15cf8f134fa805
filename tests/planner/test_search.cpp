// The search against brute force on small spaces, its constraints, determinism across thread
// counts, why-not explanations, and plan round trips.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "formats/plan.hpp"
#include "planner/search.hpp"
#include "planner/stage_partition.hpp"
#include "simulator/errors.hpp"
#include "support/sim_config.hpp"

namespace shardplan::planner {
namespace search_test {              // named, not anonymous: the files share a unity-build unit
using namespace shardplan::formats;  // Plan, load_plan, save_plan: formats/plan.hpp

namespace sim = shardplan::simulator;

SearchSpace small_space() {
  SearchSpace s;
  s.node_counts = {1};
  s.global_batch_sizes = {16};
  s.seq_len = 512;
  s.micro_batch_sizes = {1, 2, 4};
  s.virtual_stages = {2};
  return s;
}

// Every configuration of the space, simulated in full, the best by throughput.
double brute_force_best(const sim::ModelSpec& m, const sim::HardwareProfile& hw, const SearchSpace& s,
                        const Constraints& c, int* feasible_count) {
  double best = 1e300;
  *feasible_count = 0;
  const sim::ClusterSpec cluster{hw, s.node_counts.front(), 0};
  const int D = cluster.devices();
  for (int tp = 1; tp <= D; tp *= 2)
    for (int pp = 1; pp <= D / tp; ++pp) {
      if (D % (tp * pp)) continue;
      for (int z : s.zero_stages)
        for (int mbs : s.micro_batch_sizes)
          for (auto sched : s.schedules)
            for (int v : {1, 2})
              for (auto rc : s.recomputes)
                for (bool sp : {false, true})
                  for (bool oo : {false, true})
                    for (bool oa : {false, true}) {
                      sim::ParallelConfig cfg;
                      cfg.tp = tp;
                      cfg.pp = pp;
                      cfg.dp = D / (tp * pp);
                      cfg.zero_stage = z;
                      cfg.micro_batch_size = mbs;
                      cfg.global_batch_size = s.global_batch_sizes.front();
                      cfg.seq_len = s.seq_len;
                      cfg.schedule = sched;
                      cfg.virtual_stages = v;
                      cfg.recompute = rc;
                      cfg.sequence_parallel = sp;
                      cfg.offload_optimizer = oo;
                      cfg.offload_activations = oa;
                      cfg.memory_headroom = c.memory_headroom;
                      if (tp > hw.node.devices_per_node) continue;
                      try {
                        const sim::Prediction p = sim::simulate(m, cluster, cfg);
                        if (!p.feasible) continue;
                        ++*feasible_count;
                        best = std::min(best, 1.0 / p.tokens_per_s);
                      } catch (const sim::InputError&) {}
                    }
    }
  return best;
}

TEST(Search, NeverWorseThanBruteForce) {
  struct Case {
    const char* model;
    const char* hw;
    double headroom;
  };
  // A roomy case and a tight one where memory decides (gpt2-xl on 24 GB A10Gs).
  for (const Case& k : {Case{"tiny-llama", "p4d.24xlarge", 0.05}, Case{"gpt2-xl", "g5.48xlarge", 0.05},
                        Case{"gpt2", "g5.48xlarge", 0.9}}) {
    const sim::ModelSpec m = sim::load_model(k.model);
    const sim::HardwareProfile hw = sim::load_hardware(k.hw);
    SearchSpace s = small_space();
    s.uneven_pipeline = false;
    Constraints c;
    c.memory_headroom = k.headroom;
    SearchOptions o;
    o.top_k = 5;
    const SearchResult r = search(m, hw, s, c, o);
    int feasible = 0;
    const double best = brute_force_best(m, hw, s, c, &feasible);
    ASSERT_GT(feasible, 0) << k.model;
    ASSERT_FALSE(r.ranked.empty()) << k.model;
    EXPECT_LE(r.ranked.front().score, best * (1 + 1e-9)) << k.model << " on " << k.hw;
    for (std::size_t i = 1; i < r.ranked.size(); ++i) EXPECT_LE(r.ranked[i - 1].score, r.ranked[i].score);
  }
}

TEST(Search, IdenticalForAnyThreadCount) {
  const sim::ModelSpec m = sim::load_model("gpt-neox-20b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace s;
  s.node_counts = {1, 2, 4};
  s.global_batch_sizes = {64};
  s.seq_len = 2048;
  Constraints c;
  SearchOptions o;
  o.top_k = 8;
  o.threads = 1;
  // The step-time bound's skips depend on what each thread has found (test_bound_pruning.cpp
  // checks its answers); without it the counts and the rejected regions are exact too.
  o.bound_pruning = false;
  const SearchResult a = search(m, hw, s, c, o);
  o.threads = 4;
  const SearchResult b = search(m, hw, s, c, o);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(a.ranked[i].candidate.key, b.ranked[i].candidate.key);
    EXPECT_EQ(a.ranked[i].score, b.ranked[i].score);
  }
  ASSERT_EQ(a.pareto.size(), b.pareto.size());
  for (std::size_t i = 0; i < a.pareto.size(); ++i) EXPECT_EQ(a.pareto[i].key, b.pareto[i].key);
  ASSERT_EQ(a.rejected.size(), b.rejected.size());
  for (std::size_t i = 0; i < a.rejected.size(); ++i) EXPECT_EQ(a.rejected[i].reason, b.rejected[i].reason);
  EXPECT_EQ(a.evaluated, b.evaluated);
  EXPECT_EQ(a.pruned, b.pruned);
}

TEST(Search, ConstraintsAreHonoured) {
  const sim::ModelSpec m = sim::load_model("llama2-13b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace s;
  s.node_counts = {1, 2, 4};
  s.global_batch_sizes = {64};
  s.seq_len = 2048;
  SearchOptions o;
  o.top_k = 20;
  Constraints c;
  c.max_usd_per_hour = hw.price.usd_per_hour * 2.5;  // 1 or 2 nodes
  c.max_tp = 2;
  c.require = {"pp"};
  c.forbid = {"zero3", "offload"};
  const SearchResult r = search(m, hw, s, c, o);
  ASSERT_FALSE(r.ranked.empty());
  for (const auto& x : r.ranked) {
    const auto& cfg = x.candidate.config;
    EXPECT_LE(x.candidate.cluster.nodes, 2);
    EXPECT_LE(cfg.tp, 2);
    EXPECT_GT(cfg.pp, 1);
    EXPECT_NE(cfg.zero_stage, 3);
    EXPECT_FALSE(cfg.offload_optimizer || cfg.offload_activations);
    EXPECT_TRUE(x.prediction.feasible);
  }
  for (const auto& x : r.pareto) EXPECT_GT(x.config.pp, 1);
  // The 4-node region is reported as rejected by price.
  bool four_nodes_reported = false;
  for (const auto& g : r.rejected) four_nodes_reported |= g.region == "nodes=4";
  EXPECT_TRUE(four_nodes_reported);
  Constraints bad;
  bad.require = {"warp-drive"};
  EXPECT_THROW(search(m, hw, s, bad, o), sim::InputError);
}

TEST(Search, ExplainsWhyFullFineTuningOfLlama70bDoesNotFitOneGaudiNode) {
  const sim::ModelSpec m = sim::load_model("llama2-70b");
  const sim::HardwareProfile hw = sim::load_hardware("gaudi2-hls2");
  SearchSpace s;
  s.global_batch_sizes = {8};
  s.seq_len = 2048;
  Constraints c;
  SearchOptions o;
  const SearchResult full = search(m, hw, s, c, o);
  EXPECT_TRUE(full.ranked.empty());
  ASSERT_FALSE(full.rejected.empty());
  bool mentions_states = false;
  for (const auto& g : full.rejected)
    mentions_states |=
        g.reason.find("optimizer states") != std::string::npos || g.reason.find("parameters") != std::string::npos;
  EXPECT_TRUE(mentions_states);

  s.lora.rank = 4;
  s.lora.alpha = 16;
  s.lora.dropout = 0.05;
  s.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  const SearchResult lora = search(m, hw, s, c, o);
  ASSERT_FALSE(lora.ranked.empty());
  EXPECT_TRUE(lora.ranked.front().prediction.feasible);

  // Why not ZeRO-0 data parallelism with LoRA? The 70B bf16 weights alone (~128 GiB) exceed 96 GB.
  const sim::ClusterSpec node{hw, 1, 0};
  sim::ParallelConfig cfg = testing::config(node, 1, 1, 0, 1, 8, 2048);
  cfg.lora = s.lora;
  const std::string why = why_not(m, node, cfg, lora, c, o.objective);
  EXPECT_NE(why.find("does not fit"), std::string::npos) << why;
  EXPECT_NE(why.find("parameters"), std::string::npos) << why;
}

TEST(Search, WhyNotComparesAFeasibleConfigurationWithThePlan) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace s;
  s.global_batch_sizes = {32};
  s.seq_len = 2048;
  Constraints c;
  SearchOptions o;
  const SearchResult r = search(m, hw, s, c, o);
  ASSERT_FALSE(r.ranked.empty());
  const sim::ClusterSpec node{hw, 1, 0};
  sim::ParallelConfig cfg = testing::config(node, 1, 2, 1, 1, 32, 2048);
  cfg.schedule = sim::PipelineSchedule::gpipe;
  cfg.recompute = sim::Recompute::full;
  const std::string why = why_not(m, node, cfg, r, c, o.objective);
  EXPECT_NE(why.find("worse"), std::string::npos) << why;
  // ... and names the knobs the plan changes: this one has pp 2 and full recompute.
  const sim::ParallelConfig& plan = r.ranked.front().candidate.config;
  EXPECT_NE(why.find("the plan changes"), std::string::npos) << why;
  if (plan.pp != 2) EXPECT_NE(why.find("pp 2->" + std::to_string(plan.pp)), std::string::npos) << why;
  if (plan.recompute != sim::Recompute::full) EXPECT_NE(why.find("recompute full->"), std::string::npos) << why;
}

TEST(Plan, RoundTripsThroughJson) {
  const sim::ModelSpec m = sim::load_model("llama2-70b");
  const sim::ClusterSpec cluster{sim::load_hardware("gaudi2-hls2"), 1, 0};
  sim::ParallelConfig cfg = testing::config(cluster, 1, 1, 3, 1, 16, 2048);
  cfg.recompute = sim::Recompute::full;
  cfg.lora = {4, 16, 0.05, {"q_proj", "k_proj", "v_proj", "o_proj"}};
  Plan plan{"test", m, cluster, cfg, sim::simulate(m, cluster, cfg), {{"objective", "throughput"}}};
  const std::string path = (std::filesystem::temp_directory_path() / "shardplan_plan_roundtrip.json").string();
  save_plan(plan, path);
  const Plan back = load_plan(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.config.zero_stage, 3);
  EXPECT_EQ(back.config.lora.targets, cfg.lora.targets);
  EXPECT_EQ(back.cluster.nodes, 1);
  EXPECT_EQ(sim::count_parameters(back.model).total, sim::count_parameters(m).total);
  EXPECT_DOUBLE_EQ(back.prediction.time.step_s, plan.prediction.time.step_s);
  EXPECT_DOUBLE_EQ(back.prediction.worst.total(), plan.prediction.worst.total());
  EXPECT_EQ(back.cluster.hardware.device.memory_bytes, cluster.hardware.device.memory_bytes);
}

TEST(Plan, BadPlanFilesAreRejectedWithTheField) {
  nlohmann::json j = {{"schema", "shardplan.plan/999"}};
  try {
    plan_from_json(j, "p.json");
    FAIL();
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: field 'schema'"), std::string::npos) << e.what();
  }
}

TEST(AutoPartition, BeatsTheNaiveUnevenSplitUnderTheFullSimulation) {
  // 32 layers over 3 stages: the LM head and the embedding make the ends heavier.
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::ClusterSpec c{sim::load_hardware("p4de.24xlarge"), 1, 6};
  sim::ParallelConfig cfg = testing::config(c, 1, 3, 1, 1, 24, 2048);
  cfg.recompute = sim::Recompute::full;
  cfg.partition = {10, 11, 11};
  sim::validate_config(m, c, cfg);
  const sim::Evaluator ev(m, c, cfg.lora);
  const auto part = choose_partition(ev, cfg, PartitionGoal::speed);
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(std::accumulate(part->begin(), part->end(), 0), 32);
  EXPECT_LT(part->back(), part->at(1));  // the head's stage gets fewer layers
  sim::ParallelConfig chosen = cfg;
  chosen.partition = *part;
  const double naive = ev.simulate(cfg).time.step_s, tuned = ev.simulate(chosen).time.step_s;
  EXPECT_LE(tuned, naive * (1 + 1e-12));
  // Memory goal: the first stage (most micro-batches in flight) gets fewer layers.
  const auto mem = choose_partition(ev, cfg, PartitionGoal::memory);
  ASSERT_TRUE(mem.has_value());
  EXPECT_LE(mem->front(), part->front());
  EXPECT_LE(ev.simulate([&] {
                auto x = cfg;
                x.partition = *mem;
                return x;
              }())
                .worst.total(),
            ev.simulate(chosen).worst.total() * (1 + 1e-12));
}

TEST(Search, CancelReturnsBestSoFar) {
  const sim::ModelSpec m = sim::load_model("gpt3-175b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace s;
  s.node_counts = {16, 32, 64};
  s.global_batch_sizes = {1536};
  std::atomic<bool> cancel{true};  // as if Ctrl-C came at once: each thread finishes one block
  SearchOptions o;
  o.threads = 1;
  o.cancel = &cancel;
  const SearchResult r = search(m, hw, s, Constraints{}, o);
  EXPECT_TRUE(r.interrupted);
  o.cancel = nullptr;
  const SearchResult full = search(m, hw, s, Constraints{}, o);
  EXPECT_FALSE(full.interrupted);
  EXPECT_LT(r.considered, full.considered);
  if (!r.ranked.empty()) { EXPECT_GE(r.ranked.front().score, full.ranked.front().score); }
}

}  // namespace search_test
}  // namespace shardplan::planner
