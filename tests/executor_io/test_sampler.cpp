// Sampler: per-epoch permutations, exact data-parallel partition, order-independent results.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "executor/data/sampler.hpp"
#include "simulator/errors.hpp"

namespace shardplan::executor::data {
namespace sampler_test {  // named, not anonymous: the files share a unity-build unit

using simulator::InputError;

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// The stream of the first `steps` global batches, concatenated.
std::vector<int64_t> stream(const Sampler& s, int64_t steps) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < steps; ++k) {
    const auto b = s.global_batch(k);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

TEST(Sampler, EachEpochOfTheStreamIsAPermutation) {
  const int64_t n = 37, g = 5;
  const Sampler s(n, g, 1234);
  const auto all = stream(s, 3 * n / g + 1);  // a bit more than three epochs
  ASSERT_GE(static_cast<int64_t>(all.size()), 3 * n);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> epoch(all.begin() + e * n, all.begin() + (e + 1) * n);
    EXPECT_EQ(epoch, s.epoch_permutation(e)) << "epoch " << e;
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, iota_vector(n)) << "epoch " << e;
    epochs.push_back(s.epoch_permutation(e));
  }
  EXPECT_NE(epochs[0], epochs[1]);  // reshuffled every epoch
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_NE(epochs[0], iota_vector(n));  // actually shuffled
}

TEST(Sampler, DataParallelRanksPartitionTheGlobalBatchExactly) {
  const int64_t n = 50, g = 12;
  const Sampler s(n, g, 7);
  for (const int dp : {1, 2, 3, 4, 6, 12}) {
    for (int64_t step = 0; step < 12; ++step) {  // crosses epoch boundaries (50 is not a multiple of 12)
      const auto global = s.global_batch(step);
      ASSERT_EQ(static_cast<int64_t>(global.size()), g);
      std::vector<int64_t> joined;
      std::set<int64_t> seen;
      for (int r = 0; r < dp; ++r) {
        const auto part = s.rank_batch(step, r, dp);
        EXPECT_EQ(static_cast<int64_t>(part.size()), g / dp);
        joined.insert(joined.end(), part.begin(), part.end());
        seen.insert(part.begin(), part.end());
      }
      EXPECT_EQ(joined, global) << "dp " << dp << " step " << step;  // union in rank order = global batch
      // Disjoint unless the step straddles an epoch boundary (where an index may recur).
      if ((step * g) / n == (step * g + g - 1) / n) { EXPECT_EQ(static_cast<int64_t>(seen.size()), g); }
    }
  }
}

TEST(Sampler, ResultsDoNotDependOnCallOrder) {
  const Sampler forward(29, 8, 99);
  std::vector<std::vector<int64_t>> expected;
  for (int64_t k = 0; k < 20; ++k) expected.push_back(forward.global_batch(k));
  const Sampler backward(29, 8, 99);
  for (int64_t k = 19; k >= 0; --k) EXPECT_EQ(backward.global_batch(k), expected[static_cast<size_t>(k)]) << k;
  // Resuming: a fresh sampler asked only for step 17 (and ranks out of order).
  const Sampler resumed(29, 8, 99);
  EXPECT_EQ(resumed.rank_batch(17, 3, 4), std::vector<int64_t>(expected[17].begin() + 6, expected[17].end()));
  EXPECT_EQ(resumed.rank_batch(17, 0, 4), std::vector<int64_t>(expected[17].begin(), expected[17].begin() + 2));
  // Copies give the same stream.
  const Sampler copy = forward;
  EXPECT_EQ(copy.global_batch(11), expected[11]);
}

TEST(Sampler, SeedChangesTheOrder) {
  EXPECT_NE(Sampler(100, 10, 1).global_batch(0), Sampler(100, 10, 2).global_batch(0));
  EXPECT_EQ(Sampler(100, 10, 1).global_batch(3), Sampler(100, 10, 1).global_batch(3));
}

TEST(Sampler, EpochOfMatchesTheStream) {
  const int64_t n = 23, g = 6;
  const Sampler s(n, g, 5);
  for (int64_t step = 0; step < 30; ++step) {
    const int64_t e = s.epoch_of(step);
    EXPECT_EQ(s.global_batch(step).front(), s.epoch_permutation(e)[static_cast<size_t>((step * g) % n)]) << step;
    EXPECT_LE(e * n, step * g);
    EXPECT_LT(step * g, (e + 1) * n);
  }
}

TEST(Sampler, GlobalBatchLargerThanTheDataset) {
  const Sampler s(3, 7, 11);
  const auto all = stream(s, 3);  // 21 positions = 7 epochs of 3
  for (int e = 0; e < 7; ++e) {
    const std::vector<int64_t> epoch(all.begin() + 3 * e, all.begin() + 3 * (e + 1));
    EXPECT_EQ(epoch, s.epoch_permutation(e));
  }
}

TEST(Sampler, ShuffleIsUniformOverPermutations) {
  // Fisher-Yates with an unbiased draw reaches all 4! orders equally often (a Sattolo-style
  // off-by-one would reach only 6, a modulo-biased one would skew the counts).
  std::map<std::vector<int64_t>, int> counts;
  const Sampler s(4, 4, 42);
  const int epochs = 24000;
  for (int e = 0; e < epochs; ++e) ++counts[s.epoch_permutation(e)];
  EXPECT_EQ(counts.size(), 24u);
  for (const auto& [perm, c] : counts) {
    EXPECT_GT(c, 800);
    EXPECT_LT(c, 1200);
  }
}

TEST(Sampler, GlobalBatchNotDivisibleByDpIsAnInputError) {
  const Sampler s(100, 10, 0);
  try {
    (void)s.rank_batch(0, 0, 3);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("10"), std::string::npos) << what;
    EXPECT_NE(what.find("3"), std::string::npos) << what;
  }
  EXPECT_THROW((void)s.rank_batch(0, 0, 0), InputError);
}

TEST(Sampler, InvalidSizesAreInputErrors) {
  EXPECT_THROW(Sampler(0, 4, 0), InputError);
  EXPECT_THROW(Sampler(10, 0, 0), InputError);
}

}  // namespace sampler_test
}  // namespace shardplan::executor::data
