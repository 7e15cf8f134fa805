#pragma once
// Where a run's samples come from: synthetic data, a token cache (.safetensors), or text /
// Alpaca JSONL tokenised by the shardplan-tokenize tool (spawned once by world rank 0, cached
// in the output directory under a key of the inputs; see data/token_cache.hpp for why).
#include <memory>
#include <string>

#include "executor/data/dataset.hpp"
#include "options.hpp"

namespace shardplan::executor {

// Rank 0 only: makes sure the token cache for `opt` exists (runs the tokenizer tool if
// needed); returns its path ("" for synthetic data or a given cache). InputError with the
// tool's one-line message on failure.
std::string prepare_token_cache(const RunOptions& opt, int64_t model_vocab, int seq_len);
// Every rank, after rank 0 prepared it.
std::unique_ptr<data::Dataset> open_dataset(const RunOptions& opt, int64_t model_vocab, int seq_len);

}  // namespace shardplan::executor
