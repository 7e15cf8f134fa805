#pragma once
// Sampler: deterministic, resumable, data-parallel sharded sampling. Epoch e visits the dataset
// in a permutation seeded by (seed, e) (std::mt19937_64 + our own Fisher-Yates and bounded draw,
// so results do not depend on the standard library). The sample stream is epoch 0, epoch 1, ...;
// step k's global batch is stream positions [k*G, (k+1)*G) (a batch may straddle epochs), and
// data-parallel rank r of dp gets the contiguous block [r*G/dp, (r+1)*G/dp) of it. Resuming at
// step k needs nothing but k. Thread-safe; keeps the last two epochs' permutations cached.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace shardplan::executor::data {

class Sampler {
 public:
  // InputError unless dataset_size >= 1 and global_batch >= 1.
  Sampler(int64_t dataset_size, int64_t global_batch, uint64_t seed);
  Sampler(const Sampler& other);
  Sampler& operator=(const Sampler& other);

  [[nodiscard]] std::vector<int64_t> global_batch(int64_t step) const;  // G dataset indices
  // The rank's G/dp indices. InputError if G % dp != 0 or dp < 1; dp_rank must be in [0, dp).
  [[nodiscard]] std::vector<int64_t> rank_batch(int64_t step, int dp_rank, int dp) const;
  // Epoch of the step's first sample.
  [[nodiscard]] int64_t epoch_of(int64_t step) const;
  // The permutation of [0, dataset_size) that epoch `epoch` visits, in order.
  [[nodiscard]] std::vector<int64_t> epoch_permutation(int64_t epoch) const;

  [[nodiscard]] int64_t dataset_size() const { return size_; }
  [[nodiscard]] int64_t global_batch_size() const { return batch_; }

 private:
  // Dataset indices at stream positions [first, first + count).
  std::vector<int64_t> positions(int64_t first, int64_t count) const;
  std::shared_ptr<const std::vector<int64_t>> cached_permutation(int64_t epoch) const;

  int64_t size_;
  int64_t batch_;
  uint64_t seed_;
  struct Cached {
    int64_t epoch = -1;
    std::shared_ptr<const std::vector<int64_t>> perm;
  };
  mutable std::mutex mutex_;
  mutable Cached cache_[2];
  mutable int next_slot_ = 0;
};

}  // namespace shardplan::executor::data
