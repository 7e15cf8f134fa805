// Fuzz target: a token cache (`--data x.safetensors`, or what shardplan-tokenize wrote):
// data::load_token_cache checks the two int32 (samples, seq_len) tensors and every id against a
// 512-token model vocabulary; then every sample is read as the sampler does.
#include "executor/data/token_cache.hpp"
#include "fuzz_file.hpp"

namespace {
constexpr int64_t kModelVocab = 512;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = shardplan::executor::data;
  return shardplan::fuzz::run_file_reader("cache.safetensors", data, size, [](const std::string& path) {
    const auto ds = d::load_token_cache(path, kModelVocab);
    for (int64_t i = 0; i < ds->size(); ++i) {
      const d::Sample s = ds->get(i);
      if (static_cast<int>(s.input.size()) != ds->seq_len() || s.labels.size() != s.input.size()) __builtin_trap();
      for (size_t t = 0; t < s.input.size(); ++t)
        if (s.input[t] < 0 || s.input[t] >= kModelVocab ||
            (s.labels[t] != d::kIgnoreLabel && (s.labels[t] < 0 || s.labels[t] >= kModelVocab)))
          __builtin_trap();  // an id the embedding cannot look up got through
    }
    (void)ds->describe();
  });
}
