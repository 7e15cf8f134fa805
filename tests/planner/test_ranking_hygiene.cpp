// Ranking hygiene: configurations predicted identically fold into one row (the simplest), ties go
// to the simpler configuration, no Pareto point is dominated by a ranked row (both from the full
// simulation), and FP8 is searched only when asked for.
#include <gtest/gtest.h>

#include <set>

#include "planner/search.hpp"
#include "planner/search_defaults.hpp"
#include "planner/space_parse.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {
namespace ranking_hygiene_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;

// Llama-2-7B on one p4de node, flash attention: selective recompute stores what none stores.
SearchResult search_7b(int top_k = 12) {
  SearchSpace s;
  s.global_batch_sizes = {64};
  s.seq_len = 4096;
  s.micro_batch_sizes = {1, 2};
  s.recomputes = {sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full};
  SearchOptions o;
  o.top_k = top_k;
  o.threads = 1;
  return search(sim::load_model("llama2-7b"), sim::load_hardware("p4de.24xlarge"), s, Constraints{}, o);
}

TEST(RankingHygiene, IdenticalPredictionsFoldIntoTheSimplestRow) {
  const SearchResult r = search_7b();
  ASSERT_GT(r.ranked.size(), 2u);
  int folded = 0;
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const Ranked& x = r.ranked[i];
    for (std::size_t j = i + 1; j < r.ranked.size(); ++j) {
      const Ranked& y = r.ranked[j];
      const bool same = x.prediction.time.step_s == y.prediction.time.step_s &&
                        x.prediction.worst.total() == y.prediction.worst.total();
      EXPECT_FALSE(same) << x.candidate.key << " and " << y.candidate.key << " are listed twice";
    }
    for (const auto& e : x.equivalents) {
      ++folded;
      // The row kept does not recompute where its equivalent names selective recompute.
      if (e.find("selective") != std::string::npos)
        EXPECT_EQ(x.candidate.config.recompute, sim::Recompute::none) << x.candidate.key << " kept over " << e;
    }
  }
  EXPECT_GT(folded, 0) << "selective recompute under flash attention should tie with none";
}

TEST(RankingHygiene, NoParetoPointIsDominatedByARankedRow) {
  const SearchResult r = search_7b();
  ASSERT_FALSE(r.pareto.empty());
  for (std::size_t i = 1; i < r.pareto.size(); ++i)  // and none is listed twice
    EXPECT_FALSE(r.pareto[i].estimate.tokens_per_s == r.pareto[i - 1].estimate.tokens_per_s &&
                 r.pareto[i].estimate.worst_memory_bytes == r.pareto[i - 1].estimate.worst_memory_bytes)
        << r.pareto[i].key << " repeats " << r.pareto[i - 1].key;
  for (const auto& p : r.pareto)
    for (const auto& x : r.ranked) {
      const double tp = 1 / p.estimate.tokens_per_s, tx = 1 / x.prediction.tokens_per_s;
      const bool no_worse = tx <= tp && x.candidate.usd_per_token <= p.usd_per_token &&
                            x.prediction.worst.total() <= p.estimate.worst_memory_bytes;
      const bool better = tx < tp || x.candidate.usd_per_token < p.usd_per_token ||
                          x.prediction.worst.total() < p.estimate.worst_memory_bytes;
      EXPECT_FALSE(no_worse && better) << x.candidate.key << " dominates the front's " << p.key;
    }
}

TEST(RankingHygiene, Fp8IsSearchedOnlyWhenAsked) {
  const sim::HardwareProfile h100 = sim::load_hardware("p5.48xlarge");
  EXPECT_EQ(fp8_search_list(search_defaults().fp8, h100), std::vector<sim::Fp8Recipe>{sim::Fp8Recipe::none});
  const auto asked = fp8_search_list("auto", h100);
  EXPECT_NE(std::find(asked.begin(), asked.end(), sim::Fp8Recipe::delayed), asked.end());
}

}  // namespace ranking_hygiene_test
}  // namespace shardplan::planner
