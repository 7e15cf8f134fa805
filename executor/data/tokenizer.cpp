#include "executor/data/tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "executor/errors.hpp"

namespace shardplan::executor::data {
namespace {

// Every non-empty line of the files, in order, as SentencePiece training sentences.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& files) {
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) throw InputError(file + ": tokenizer training: cannot open the text file");
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        lines_.push_back(std::move(line));
      }
    }
    if (lines_.empty()) throw InputError(join(files) + ": tokenizer training: no text in the files");
  }
  bool done() const override { return next_ >= lines_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return lines_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

  static std::string join(const std::vector<std::string>& files) {
    std::string out;
    for (const auto& f : files) out += (out.empty() ? "" : ", ") + f;
    return out.empty() ? std::string("(no files)") : out;
  }

 private:
  std::vector<std::string> lines_;
  size_t next_ = 0;
};

// The fixed training settings (see the header). No model_prefix: the trainer returns the model
// bytes and we write the files, so the bytes do not depend on where they are written.
std::unordered_map<std::string, std::string> trainer_args(int vocab_size) {
  return {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"hard_vocab_limit", "false"},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"minloglevel", "2"},
  };
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw InputError(path + ": tokenizer training: cannot write the file");
}

// <prefix>.vocab in SentencePiece's format: "piece<TAB>score" per id.
std::string vocab_text(const sentencepiece::SentencePieceProcessor& sp) {
  std::ostringstream out;
  for (int id = 0; id < sp.GetPieceSize(); ++id) out << sp.IdToPiece(id) << '\t' << sp.GetScore(id) << '\n';
  return out.str();
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp, std::string path)
    : sp_(std::move(sp)), path_(std::move(path)) {}

Tokenizer Tokenizer::load(const std::string& model_path) {
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  if (!std::ifstream(model_path, std::ios::binary)) {
    throw InputError(model_path + ": tokenizer: cannot load (no such file or not readable)");
  }
  if (const auto status = sp->Load(model_path); !status.ok()) {
    throw InputError(model_path + ": tokenizer: cannot load (not a SentencePiece model: " + status.ToString() + ")");
  }
  if (sp->GetPieceSize() <= 0) throw InputError(model_path + ": tokenizer: cannot load (empty vocabulary)");
  return Tokenizer(std::move(sp), model_path);
}

void Tokenizer::train(const std::vector<std::string>& text_files, const std::string& model_prefix, int vocab_size) {
  if (vocab_size <= 0) {
    throw InputError(model_prefix + ": tokenizer training: vocab_size must be positive, got " +
                     std::to_string(vocab_size));
  }
  LineIterator lines(text_files);
  sentencepiece::SetRandomGeneratorSeed(20240601u);
  std::string model_bytes;
  const auto status = sentencepiece::SentencePieceTrainer::Train(trainer_args(vocab_size), &lines, &model_bytes);
  if (!status.ok()) {
    throw InputError(LineIterator::join(text_files) + ": tokenizer training failed (" + status.ToString() + ")");
  }
  sentencepiece::SentencePieceProcessor sp;
  EXECUTOR_CHECK(sp.LoadFromSerializedProto(model_bytes).ok(), "trained tokenizer does not load");
  write_file(model_prefix + ".model", model_bytes);
  write_file(model_prefix + ".vocab", vocab_text(sp));
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  EXECUTOR_CHECK(status.ok(), path_ + ": tokenizer: encode failed: " + status.ToString());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  const int n = vocab_size();
  for (const int id : ids) {
    if (id < 0 || id >= n) {
      throw InputError(path_ + ": tokenizer: cannot decode id " + std::to_string(id) + ": expected an id in [0, " +
                       std::to_string(n) + ")");
    }
  }
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  EXECUTOR_CHECK(status.ok(), path_ + ": tokenizer: decode failed: " + status.ToString());
  return text;
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
int Tokenizer::pad_id() const { return sp_->pad_id() >= 0 ? sp_->pad_id() : sp_->eos_id(); }

}  // namespace shardplan::executor::data
