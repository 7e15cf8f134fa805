// Which hardware: a search over a list of profiles equals the per-profile searches merged (by
// score, each row naming its profile), its Pareto front has no point another profile's point
// dominates, a profile without a price is left out of a cost ranking with a note, "all" covers the
// built-in accelerator profiles, and an unknown name is one line naming --hardware.
#include <gtest/gtest.h>

#include <algorithm>

#include "planner/hardware_search.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {
namespace hardware_search_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;

SearchSpace space() {
  SearchSpace s;
  s.node_counts = {1, 2};
  s.global_batch_sizes = {64};
  s.seq_len = 4096;
  return s;
}

SearchOptions options(Objective o) {
  SearchOptions opt;
  opt.objective = o;
  opt.top_k = 10;
  opt.threads = 1;
  return opt;
}

TEST(HardwareSearch, EqualsThePerProfileSearchesMerged) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const std::vector<sim::HardwareProfile> hw = {sim::load_hardware("p4de.24xlarge"), sim::load_hardware("p5.48xlarge")};
  const SearchOptions o = options(Objective::cost);
  const HardwareSearch both = search_hardware(m, hw, space(), Constraints{}, o);
  std::vector<std::pair<double, std::string>> expected;
  for (const auto& h : hw)
    for (const auto& x : search(m, h, space(), Constraints{}, o).ranked)
      expected.emplace_back(x.score, h.name + " " + x.candidate.key);
  std::stable_sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  expected.resize(std::min<std::size_t>(expected.size(), 10));
  ASSERT_EQ(both.result.ranked.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(both.result.ranked[i].candidate.key, expected[i].second) << i;
    EXPECT_EQ(both.result.ranked[i].score, expected[i].first) << i;
  }
  for (const auto& a : both.result.pareto)
    for (const auto& b : both.result.pareto) {
      const bool dominated = b.estimate.tokens_per_s >= a.estimate.tokens_per_s && b.usd_per_token <= a.usd_per_token &&
                             b.estimate.worst_memory_bytes <= a.estimate.worst_memory_bytes &&
                             (b.estimate.tokens_per_s > a.estimate.tokens_per_s || b.usd_per_token < a.usd_per_token ||
                              b.estimate.worst_memory_bytes < a.estimate.worst_memory_bytes);
      EXPECT_FALSE(dominated) << b.key << " dominates " << a.key;
    }
}

TEST(HardwareSearch, AProfileWithoutAPriceIsLeftOutOfACostRanking) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  sim::HardwareProfile unpriced = sim::load_hardware("p5.48xlarge");
  unpriced.name = "p5-unpriced";
  unpriced.price.usd_per_hour = 0;
  const std::vector<sim::HardwareProfile> hw = {unpriced, sim::load_hardware("p4de.24xlarge")};
  const HardwareSearch cost = search_hardware(m, hw, space(), Constraints{}, options(Objective::cost));
  ASSERT_EQ(cost.notes.size(), 1u);
  EXPECT_NE(cost.notes[0].find("p5-unpriced"), std::string::npos) << cost.notes[0];
  for (const auto& x : cost.result.ranked) EXPECT_EQ(x.candidate.cluster.hardware.name, "p4de.24xlarge");
  const HardwareSearch fast = search_hardware(m, hw, space(), Constraints{}, options(Objective::throughput));
  EXPECT_TRUE(fast.notes.empty());  // throughput needs no price
}

TEST(HardwareSearch, AllIsTheAcceleratorProfilesAndAnUnknownNameIsNamed) {
  const auto all = hardware_list("all");
  EXPECT_GE(all.size(), 5u);
  for (const auto& h : all) EXPECT_NE(h.device.runtime, sim::DeviceRuntime::cpu) << h.name;
  EXPECT_EQ(hardware_list("p5.48xlarge,gaudi2-hls2").size(), 2u);
  try {
    hardware_list("p5.48xlarge,b300");
    FAIL() << "expected an InputError";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--hardware"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("b300"), std::string::npos) << e.what();
  }
}

}  // namespace hardware_search_test
}  // namespace shardplan::planner
