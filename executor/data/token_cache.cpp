#include "executor/data/token_cache.hpp"

#include <filesystem>

#include "executor/errors.hpp"
#include "executor/io/safetensors.hpp"

namespace shardplan::executor::data {

namespace {

class CachedDataset final : public Dataset {
 public:
  CachedDataset(const std::string& path, int64_t model_vocab) : path_(path) {
    const io::SafetensorsReader reader(path);
    const io::TensorInfo& in = reader.at("input");
    const io::TensorInfo& lab = reader.at("labels");
    if (in.dtype != io::DType::I32 || lab.dtype != io::DType::I32 || in.shape.size() != 2 || in.shape != lab.shape)
      throw InputError(path + ": tensor 'input'/'labels': expected two int32 (samples, seq_len) tensors of one shape");
    samples_ = in.shape[0];
    seq_len_ = static_cast<int>(in.shape[1]);
    if (samples_ < 1 || seq_len_ < 1) throw InputError(path + ": tensor 'input': expected at least one sample");
    input_.resize(static_cast<size_t>(in.numel()));
    labels_.resize(static_cast<size_t>(lab.numel()));
    reader.read("input", input_.data(), input_.size() * sizeof(int32_t));
    reader.read("labels", labels_.data(), labels_.size() * sizeof(int32_t));
    check_ids("input", input_, model_vocab, false);
    check_ids("labels", labels_, model_vocab, true);
    auto it = reader.metadata().find("source");
    source_ = it == reader.metadata().end() ? "" : it->second;
  }
  int64_t size() const override { return samples_; }
  int seq_len() const override { return seq_len_; }
  std::string describe() const override { return source_.empty() ? "token cache " + path_ : source_; }
  Sample get(int64_t index) const override {
    EXECUTOR_CHECK(index >= 0 && index < samples_, "token cache: index out of range");
    const size_t at = static_cast<size_t>(index) * static_cast<size_t>(seq_len_);
    Sample s;
    s.input.assign(input_.begin() + static_cast<std::ptrdiff_t>(at),
                   input_.begin() + static_cast<std::ptrdiff_t>(at + seq_len_));
    s.labels.assign(labels_.begin() + static_cast<std::ptrdiff_t>(at),
                    labels_.begin() + static_cast<std::ptrdiff_t>(at + seq_len_));
    return s;
  }

 private:
  void check_ids(const char* tensor, const std::vector<int32_t>& ids, int64_t vocab, bool labels) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t id = ids[i];
      if ((id >= 0 && id < vocab) || (labels && id == kIgnoreLabel)) continue;
      throw InputError(path_ + ": tensor '" + tensor + "': sample " +
                       std::to_string(i / static_cast<size_t>(seq_len_)) + ", position " +
                       std::to_string(i % static_cast<size_t>(seq_len_)) + ": token id " + std::to_string(id) +
                       " outside the model's vocabulary [0, " + std::to_string(vocab) + ")" +
                       (labels ? " (or -100, ignored)" : "") + "; expected a cache tokenised for this model");
    }
  }

  std::string path_, source_;
  int64_t samples_ = 0;
  int seq_len_ = 0;
  std::vector<int32_t> input_, labels_;
};

}  // namespace

void write_token_cache(const Dataset& ds, const std::string& path, const std::map<std::string, std::string>& metadata) {
  const int64_t n = ds.size(), S = ds.seq_len();
  std::vector<int32_t> input(static_cast<size_t>(n * S)), labels(static_cast<size_t>(n * S));
  for (int64_t i = 0; i < n; ++i) {
    const Sample s = ds.get(i);
    for (int64_t t = 0; t < S; ++t) {
      input[static_cast<size_t>(i * S + t)] = static_cast<int32_t>(s.input[static_cast<size_t>(t)]);
      labels[static_cast<size_t>(i * S + t)] = static_cast<int32_t>(s.labels[static_cast<size_t>(t)]);
    }
  }
  io::SafetensorsWriter w;
  w.add("input", io::DType::I32, {n, S}, input.data(), input.size() * sizeof(int32_t));
  w.add("labels", io::DType::I32, {n, S}, labels.data(), labels.size() * sizeof(int32_t));
  auto meta = metadata;
  meta["source"] = ds.describe();
  w.set_metadata(meta);
  w.write(path);
}

std::unique_ptr<Dataset> load_token_cache(const std::string& path, int64_t model_vocab) {
  return std::make_unique<CachedDataset>(path, model_vocab);
}

std::map<std::string, std::string> token_cache_metadata(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  try {
    return io::SafetensorsReader(path).metadata();
  } catch (const std::exception&) { return {}; }
}

}  // namespace shardplan::executor::data
