// SearchOptions::on_block: one serialised call per block, streaming each block's best (or
// closest-to-fitting) candidate, the same result as without it, and cancel from inside it.
#include <gtest/gtest.h>

#include <set>

#include "planner/search.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {
namespace search_progress_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;

SearchSpace progress_space() {
  SearchSpace s;
  s.node_counts = {1, 2};
  s.global_batch_sizes = {64};
  s.seq_len = 2048;
  return s;
}

TEST(SearchProgress, OneCallPerBlockAndTheSameResult) {
  const sim::ModelSpec m = sim::load_model("llama2-13b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  const SearchSpace s = progress_space();
  SearchOptions o;
  o.threads = 2;
  const SearchResult plain = search(m, hw, s, {}, o);

  std::vector<SearchProgress> calls;
  o.on_block = [&calls](const SearchProgress& p) { calls.push_back(p); };
  const SearchResult streamed = search(m, hw, s, {}, o);

  ASSERT_FALSE(calls.empty());
  const std::size_t total = calls.front().blocks_total;
  EXPECT_EQ(calls.size(), total);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].blocks_done, i + 1);
    EXPECT_EQ(calls[i].blocks_total, total);
    if (i > 0) { EXPECT_GE(calls[i].considered, calls[i - 1].considered); }
  }
  EXPECT_EQ(calls.back().considered, streamed.considered);

  // Streamed candidates: the feasible ones fit by the estimate; the best of them by score is
  // the best estimate of the whole search, and some blocks (full parameters on one device)
  // only report their closest-to-fitting point.
  int fitting = 0, not_fitting = 0;
  double best_streamed = 1e300;
  for (const auto& c : calls) {
    if (!c.candidate) continue;
    EXPECT_EQ(c.candidate->config.devices(), c.candidate->cluster.devices());
    if (c.candidate->estimate.fits) {
      ++fitting;
      best_streamed = std::min(best_streamed, c.candidate->score);
    } else {
      ++not_fitting;
    }
  }
  EXPECT_GT(fitting, 0);
  EXPECT_GT(not_fitting, 0);
  for (const auto& r : streamed.ranked) EXPECT_LE(best_streamed, 1.0 / r.candidate.estimate.tokens_per_s * (1 + 1e-12));

  ASSERT_EQ(plain.ranked.size(), streamed.ranked.size());
  for (std::size_t i = 0; i < plain.ranked.size(); ++i)
    EXPECT_EQ(plain.ranked[i].candidate.key, streamed.ranked[i].candidate.key);
  EXPECT_EQ(plain.considered, streamed.considered);
}

TEST(SearchProgress, CancelFromTheCallbackStopsEarly) {
  const sim::ModelSpec m = sim::load_model("llama2-13b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  std::atomic<bool> cancel{false};
  SearchOptions o;
  o.threads = 1;
  o.cancel = &cancel;
  std::size_t calls = 0, total = 0;
  o.on_block = [&](const SearchProgress& p) {
    ++calls;
    total = p.blocks_total;
    if (p.blocks_done == 3) cancel = true;
  };
  const SearchResult r = search(m, hw, progress_space(), {}, o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(calls, 3u);
  EXPECT_GT(total, 3u);
}

}  // namespace search_progress_test
}  // namespace shardplan::planner
