#pragma once
// Tokenizer: a thin wrapper over a SentencePiece model (loaded from a .model file, or trained
// here with fixed, deterministic settings: BPE with byte fallback, identity normalisation, so
// decode(encode(text)) == text for any UTF-8). Copies share one immutable processor.
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace shardplan::executor::data {

class Tokenizer {
 public:
  // Loads a SentencePiece .model file (ours or a foreign one, e.g. Llama's tokenizer.model).
  // InputError "<path>: tokenizer: cannot load (...)" if it is missing or not a model.
  static Tokenizer load(const std::string& model_path);

  // Trains a BPE SentencePiece model on the text files (every non-empty line is one training
  // sentence; lines over 64 KiB are ignored) and writes <model_prefix>.model and <model_prefix>.vocab. `vocab_size` is
  // an upper bound (hard_vocab_limit=false): BPE stops early when a small corpus has no more merges. Ids: <unk>=0,
  // <s>=1, </s>=2, then 256 byte pieces <0x00>..<0xFF>, then learned pieces; no pad piece (pad_id() falls back to
  // </s>). Deterministic: one thread, input in file order, no sampling or shuffling, fixed random seed -> identical
  // .model bytes for identical input. InputError naming the file if one cannot be read, or if training fails.
  static void train(const std::vector<std::string>& text_files, const std::string& model_prefix, int vocab_size);

  [[nodiscard]] std::vector<int> encode(const std::string& text) const;
  [[nodiscard]] std::string decode(const std::vector<int>& ids) const;

  [[nodiscard]] int vocab_size() const;
  [[nodiscard]] int bos_id() const;  // -1 if the model has none
  [[nodiscard]] int eos_id() const;  // -1 if the model has none
  // The model's pad id when it defines one; otherwise eos_id() (padding is always masked out of
  // the loss, so any valid id serves; Llama-style models define no pad piece).
  [[nodiscard]] int pad_id() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  Tokenizer(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp, std::string path);
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
};

}  // namespace shardplan::executor::data
