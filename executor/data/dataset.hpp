#pragma once
// Training datasets: fixed-length (input, labels) samples from plain text, Alpaca-style JSONL
// instruction data, or a synthetic learnable sequence task. Everything is tokenised once when the
// dataset is built; get(i) is deterministic and O(seq_len). Labels use -100 for "no loss here".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/data/tokenizer.hpp"

namespace shardplan::executor::data {

inline constexpr int64_t kIgnoreLabel = -100;  // PyTorch's cross_entropy ignore_index

struct Sample {
  std::vector<int64_t> input;   // seq_len token ids
  std::vector<int64_t> labels;  // seq_len: labels[t] = target after input[0..t]; kIgnoreLabel = ignored
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  [[nodiscard]] virtual int64_t size() const = 0;             // number of samples
  [[nodiscard]] virtual Sample get(int64_t index) const = 0;  // deterministic; index in [0, size)
  [[nodiscard]] virtual int seq_len() const = 0;
  [[nodiscard]] virtual std::string describe() const = 0;  // one line for logs
};

// Plain text. A document is a paragraph: lines up to the next blank line (or end of file); its
// lines are joined with single spaces (hard-wrapped text is unwrapped). Each document is
// tokenised, followed by EOS, and all files (in the given order) are concatenated into one token
// stream, cut into non-overlapping windows of seq_len + 1 tokens (the tail is dropped). Sample i:
// input = stream[i(S+1) .. i(S+1)+S), labels = stream[i(S+1)+1 .. i(S+1)+S]. InputError if a
// file cannot be read, or the text makes no full window (names the files, tokens found/needed).
std::unique_ptr<Dataset> make_text_dataset(const std::vector<std::string>& files, const Tokenizer& tok, int seq_len);

// Alpaca JSONL: one object per non-blank line with "instruction" and "output" (strings) and an
// optional "input" (string; empty or null = none). The prompt is the Stanford Alpaca template
// (with or without input). Tokens = BOS + prompt + response + EOS (prompt and response are encoded
// separately, so the boundary is exact), truncated to seq_len + 1 and padded with pad_id();
// labels are kIgnoreLabel on prompt tokens and padding, so the loss covers the response and EOS.
// Examples whose prompt alone fills the window (no response token left) are skipped and counted
// in describe(). InputError "<file>:<line>: field 'output': expected a string" style on bad lines.
std::unique_ptr<Dataset> make_jsonl_dataset(const std::string& file, const Tokenizer& tok, int seq_len);

// The Stanford Alpaca prompt (exposed for tests and for generation demos). Empty `input` selects
// the no-input template.
std::string alpaca_prompt(const std::string& instruction, const std::string& input);

// Synthetic data, no files: sample i is the arithmetic progression x_t = (start + t * stride) mod
// vocab_size, t = 0..seq_len, with start uniform in [0, vocab_size) and stride one of
// kSyntheticStrides, both a pure function of (seed, i). Learnable: after two tokens the rest of a
// sample is determined, so a model's loss can fall far below log(vocab_size).
inline constexpr int kSyntheticStrides[] = {1, 2, 3, 5, 7};
std::unique_ptr<Dataset> make_synthetic_dataset(int64_t size, int seq_len, int vocab_size, uint64_t seed);

// The model's embedding must cover every id the tokenizer can produce: InputError naming the
// tokenizer and both vocab sizes if tok.vocab_size() > model_vocab.
void check_vocab(const Tokenizer& tok, int64_t model_vocab, const std::string& tokenizer_path);

// The .txt files directly inside `dir`, sorted by name (e.g. the shipped executor/data/corpus/).
// InputError if `dir` is not a directory or holds no .txt file.
std::vector<std::string> list_text_files(const std::string& dir);

}  // namespace shardplan::executor::data
