#include "executor/data/sampler.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "executor/errors.hpp"

namespace shardplan::executor::data {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, n) without modulo bias: reject the lowest 2^64 mod n raw values.
uint64_t bounded(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

std::vector<int64_t> make_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::mt19937_64 rng(mix64(mix64(seed) + static_cast<uint64_t>(epoch)));
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(bounded(rng, static_cast<uint64_t>(i) + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

}  // namespace

Sampler::Sampler(int64_t dataset_size, int64_t global_batch, uint64_t seed)
    : size_(dataset_size), batch_(global_batch), seed_(seed) {
  if (dataset_size < 1)
    throw InputError("sampler: dataset size: expected at least 1 sample, got " + std::to_string(dataset_size));
  if (global_batch < 1)
    throw InputError("sampler: global_batch_size: expected at least 1, got " + std::to_string(global_batch));
}

Sampler::Sampler(const Sampler& other) : size_(other.size_), batch_(other.batch_), seed_(other.seed_) {}

Sampler& Sampler::operator=(const Sampler& other) {
  if (this == &other) return *this;
  const std::lock_guard lock(mutex_);
  size_ = other.size_;
  batch_ = other.batch_;
  seed_ = other.seed_;
  cache_[0] = cache_[1] = Cached{};
  return *this;
}

std::vector<int64_t> Sampler::epoch_permutation(int64_t epoch) const {
  EXECUTOR_CHECK(epoch >= 0, "sampler: negative epoch");
  return *cached_permutation(epoch);
}

std::shared_ptr<const std::vector<int64_t>> Sampler::cached_permutation(int64_t epoch) const {
  {
    const std::lock_guard lock(mutex_);
    for (const auto& c : cache_) {
      if (c.epoch == epoch) return c.perm;
    }
  }
  auto perm = std::make_shared<const std::vector<int64_t>>(make_permutation(size_, seed_, epoch));
  const std::lock_guard lock(mutex_);
  cache_[next_slot_] = Cached{epoch, perm};
  next_slot_ = 1 - next_slot_;
  return perm;
}

std::vector<int64_t> Sampler::positions(int64_t first, int64_t count) const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  int64_t pos = first;
  while (static_cast<int64_t>(out.size()) < count) {
    const int64_t epoch = pos / size_;
    const auto perm = cached_permutation(epoch);
    const int64_t offset = pos % size_;
    const int64_t take = std::min(count - static_cast<int64_t>(out.size()), size_ - offset);
    out.insert(out.end(), perm->begin() + offset, perm->begin() + offset + take);
    pos += take;
  }
  return out;
}

std::vector<int64_t> Sampler::global_batch(int64_t step) const {
  EXECUTOR_CHECK(step >= 0 && step <= std::numeric_limits<int64_t>::max() / batch_ - 1, "sampler: step out of range");
  return positions(step * batch_, batch_);
}

std::vector<int64_t> Sampler::rank_batch(int64_t step, int dp_rank, int dp) const {
  if (dp < 1) throw InputError("sampler: dp: expected at least 1 data-parallel rank, got " + std::to_string(dp));
  if (batch_ % dp != 0) {
    throw InputError("sampler: global_batch_size " + std::to_string(batch_) + " is not divisible by dp " +
                     std::to_string(dp) + " (expected a multiple of the data-parallel degree)");
  }
  EXECUTOR_CHECK(dp_rank >= 0 && dp_rank < dp, "sampler: dp_rank out of range");
  EXECUTOR_CHECK(step >= 0 && step <= std::numeric_limits<int64_t>::max() / batch_ - 1, "sampler: step out of range");
  const int64_t per_rank = batch_ / dp;
  return positions(step * batch_ + dp_rank * per_rank, per_rank);
}

int64_t Sampler::epoch_of(int64_t step) const {
  EXECUTOR_CHECK(step >= 0 && step <= std::numeric_limits<int64_t>::max() / batch_ - 1, "sampler: step out of range");
  return step * batch_ / size_;
}

}  // namespace shardplan::executor::data
