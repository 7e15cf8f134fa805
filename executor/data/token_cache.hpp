#pragma once
// Token cache: a tokenised dataset stored as safetensors ("input" and "labels", int32,
// (samples, seq_len)), written by `shardplan-tokenize encode` and read by shardrun. The split
// exists because sentencepiece bundles its own protobuf, which clashes with LibTorch's
// libprotobuf in one process (a crash at load time): tokenising runs in its own process, as
// Megatron's preprocess_data.py does, and the trainer reads plain token ids.
// Metadata keys: "source" (describe() of the original dataset), "key" (what produced it:
// data files, tokenizer checksum, seq_len), "vocab_size".
#include <map>
#include <memory>
#include <string>

#include "executor/data/dataset.hpp"

namespace shardplan::executor::data {

// Writes every sample of `ds` (atomically).
void write_token_cache(const Dataset& ds, const std::string& path, const std::map<std::string, std::string>& metadata);
// Loads a cache; InputError naming the file when it is not a token cache, or when a token id lies
// outside the model's embedding: every input id in [0, model_vocab), every label in
// [0, model_vocab) or kIgnoreLabel (the error names the tensor, the sample, the position and
// the id). A `--data x.safetensors` from elsewhere is checked like one shardplan-tokenize wrote.
std::unique_ptr<Dataset> load_token_cache(const std::string& path, int64_t model_vocab);
// The metadata of a cache (empty if the file does not exist or is not one).
std::map<std::string, std::string> token_cache_metadata(const std::string& path);

}  // namespace shardplan::executor::data
