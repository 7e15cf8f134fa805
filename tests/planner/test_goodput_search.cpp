// The planner with failures: time-to-train and cost rank by time including failures (goodput),
// so a short node MTBF moves the best plan to fewer nodes; plans carry the checkpoint interval.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/plan.hpp"
#include "planner/search.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::planner {
namespace goodput_search_test {      // named, not anonymous: the files share a unity-build unit
using namespace shardplan::formats;  // Plan, load_plan, save_plan: formats/plan.hpp

namespace sim = shardplan::simulator;
using testing::TempDir;

SearchSpace node_space() {
  SearchSpace s;
  s.node_counts = {1, 2, 4, 8, 16};
  s.global_batch_sizes = {512};
  s.seq_len = 2048;
  s.micro_batch_sizes = {1, 2};
  s.zero_stages = {1};
  s.mics = false;
  s.schedules = {sim::PipelineSchedule::one_f_one_b};
  s.recomputes = {sim::Recompute::none, sim::Recompute::selective};
  s.sequence_parallel = {false};
  s.offload_optimizer = {false};
  s.offload_activations = {false};
  return s;
}

Ranked best(const sim::HardwareProfile& hw, Objective objective) {
  SearchOptions o;
  o.objective = objective;
  o.train_tokens = 2e11;
  o.top_k = 3;
  const SearchResult r = search(sim::load_model("llama2-7b"), hw, node_space(), Constraints{}, o);
  EXPECT_FALSE(r.ranked.empty());
  return r.ranked.front();
}

TEST(GoodputSearch, ShortMtbfMovesTheTimeToTrainOptimumToFewerNodes) {
  sim::HardwareProfile reliable = sim::load_hardware("p4de.24xlarge");
  reliable.resilience.node_mtbf_s = 1e9 * 3600;
  sim::HardwareProfile flaky = reliable;
  flaky.resilience.node_mtbf_s = 2.0 * 3600;  // a node fails every 2 hours
  flaky.resilience.restart_s = 1800;
  {
    const Objective obj = Objective::time_to_train;
    const Ranked a = best(reliable, obj), b = best(flaky, obj);
    EXPECT_GT(a.prediction.goodput.goodput, 0.999) << to_string(obj);
    EXPECT_LT(b.candidate.cluster.nodes, a.candidate.cluster.nodes)
        << to_string(obj) << ": reliable " << a.candidate.key << ", flaky " << b.candidate.key;
    // The flaky optimum beats the reliable one's layout once failures count.
    const double score_flaky_best = b.score;
    sim::ClusterSpec other = a.candidate.cluster;
    other.hardware = flaky;
    sim::ParallelConfig cfg = a.candidate.config;
    const sim::Prediction p = sim::simulate(sim::load_model("llama2-7b"), other, cfg, sim::TrainingGoal{2e11});
    EXPECT_LT(score_flaky_best, objective_score(obj, p.tokens_per_s, other.hardware.price.usd_per_hour * other.nodes,
                                                p.worst.total(), p.goodput.goodput));
  }
  // Cost counts the failures too: the same plan costs more per token on flaky nodes.
  const Ranked ca = best(reliable, Objective::cost), cb = best(flaky, Objective::cost);
  EXPECT_GT(cb.score, ca.score * 1.01);
  EXPECT_NEAR(cb.score, cb.candidate.usd_per_token / cb.prediction.goodput.goodput, 1e-9 * cb.score);
  // Throughput ignores failures: the same plan either way.
  EXPECT_EQ(best(reliable, Objective::throughput).candidate.key, best(flaky, Objective::throughput).candidate.key);
}

TEST(GoodputSearch, PlanCarriesTheCheckpointIntervalAndTheOverridesRoundTrip) {
  TempDir dir("goodput_plan");
  sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  hw.resilience.node_mtbf_s = 100 * 3600;
  hw.resilience.checkpoint_write_Bps = 3e9;
  hw.resilience.restart_s = 123;
  const Ranked r = best(hw, Objective::time_to_train);
  const Plan plan{sim::version(), sim::load_model("llama2-7b"), r.candidate.cluster, r.candidate.config,
                  r.prediction,   nlohmann::json::object()};
  const std::string path = dir.file("plan.json");
  save_plan(plan, path);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  EXPECT_EQ(j["checkpoint"]["interval_steps"].get<int64_t>(), r.prediction.goodput.interval_steps);
  EXPECT_GT(j["checkpoint"]["interval_seconds"].get<double>(), 0.0);
  EXPECT_EQ(j["prediction"]["resilience"]["checkpoint_interval_steps"], j["checkpoint"]["interval_steps"]);
  const Plan back = load_plan(path);  // re-simulated from the embedded profile
  EXPECT_DOUBLE_EQ(back.cluster.hardware.resilience.node_mtbf_s, 100 * 3600);
  EXPECT_DOUBLE_EQ(back.cluster.hardware.resilience.checkpoint_write_Bps, 3e9);
  EXPECT_DOUBLE_EQ(back.cluster.hardware.resilience.restart_s, 123);
  EXPECT_EQ(back.prediction.goodput.interval_steps, r.prediction.goodput.interval_steps);
}

TEST(GoodputSearch, ProfileResilienceFieldsAreValidated) {
  TempDir dir("goodput_profile");
  auto write = [&](const std::string& body) {
    const std::string p = dir.file("hw.json");
    std::ofstream(p) << R"({"base": "p4de.24xlarge", "resilience": )" << body << "}";
    return p;
  };
  const sim::HardwareProfile ok =
      sim::load_hardware(write(R"({"node_mtbf_hours": 500, "checkpoint_write_GBps": 4, "restart_s": 90})"));
  EXPECT_DOUBLE_EQ(ok.resilience.node_mtbf_s, 500 * 3600);
  EXPECT_DOUBLE_EQ(ok.resilience.checkpoint_write_Bps, 4e9);
  EXPECT_DOUBLE_EQ(ok.resilience.restart_s, 90);
  const sim::HardwareProfile defaults = sim::load_hardware(write("{}"));
  EXPECT_DOUBLE_EQ(defaults.resilience.node_mtbf_s, sim::kDefaultNodeMtbfHours * 3600);
  try {
    sim::load_hardware(write(R"({"node_mtbf_hours": -1})"));
    FAIL() << "accepted a negative MTBF";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("resilience.node_mtbf_hours"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sim::load_hardware(write(R"({"checkpoint_write_GBps": 1, "checkpoint_write_MBps": 1000})")),
               sim::InputError);
}

}  // namespace goodput_search_test
}  // namespace shardplan::planner
