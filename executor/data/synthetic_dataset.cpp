// The synthetic dataset (no files, no tokenizer): see dataset.hpp.
#include <iterator>

#include "executor/data/dataset.hpp"
#include "executor/errors.hpp"
#include "executor/seed_hash.hpp"

namespace shardplan::executor::data {
namespace {

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(int64_t size, int seq_len, int vocab_size, uint64_t seed)
      : size_(size), seq_len_(seq_len), vocab_(vocab_size), seed_(seed) {
    if (size < 1) throw InputError("synthetic dataset: size: expected at least 1 sample, got " + std::to_string(size));
    if (seq_len < 1)
      throw InputError("synthetic dataset: seq_len: expected a positive integer, got " + std::to_string(seq_len));
    if (vocab_size < 2)
      throw InputError("synthetic dataset: vocab_size: expected at least 2, got " + std::to_string(vocab_size));
  }

  int64_t size() const override { return size_; }
  int seq_len() const override { return seq_len_; }
  std::string describe() const override {
    return "synthetic: " + std::to_string(size_) + " arithmetic progressions mod " + std::to_string(vocab_) +
           " of seq_len " + std::to_string(seq_len_) + " (seed " + std::to_string(seed_) + ")";
  }

  Sample get(int64_t index) const override {
    EXECUTOR_CHECK(index >= 0 && index < size_, "synthetic dataset: index out of range");
    const uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(index)));
    const auto start = static_cast<int64_t>(h % static_cast<uint64_t>(vocab_));
    const int64_t stride = kSyntheticStrides[splitmix64(h) % std::size(kSyntheticStrides)];
    Sample s;
    s.input.resize(static_cast<size_t>(seq_len_));
    s.labels.resize(static_cast<size_t>(seq_len_));
    int64_t x = start;
    for (int t = 0; t < seq_len_; ++t) {
      s.input[static_cast<size_t>(t)] = x;
      x = (x + stride) % vocab_;
      s.labels[static_cast<size_t>(t)] = x;
    }
    return s;
  }

 private:
  int64_t size_;
  int seq_len_;
  int64_t vocab_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic_dataset(int64_t size, int seq_len, int vocab_size, uint64_t seed) {
  return std::make_unique<SyntheticDataset>(size, seq_len, vocab_size, seed);
}

}  // namespace shardplan::executor::data
