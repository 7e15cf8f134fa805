// Text dataset, check_vocab, list_text_files (the JSONL dataset is in jsonl_dataset.cpp; the
// synthetic one, which needs no tokenizer, in synthetic_dataset.cpp).
#include "executor/data/dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "executor/errors.hpp"

namespace shardplan::executor::data {
namespace {

std::string join_names(const std::vector<std::string>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + f;
  return out.empty() ? std::string("(no files)") : out;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// Appends the tokens of every paragraph of `file` to `stream`, EOS after each; returns how many
// documents (paragraphs) it found.
int64_t tokenize_file(const std::string& file, const Tokenizer& tok, std::vector<int32_t>& stream) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": text dataset: cannot open the file");
  int64_t documents = 0;
  std::string paragraph;
  const auto flush = [&] {
    if (paragraph.empty()) return;
    for (const int id : tok.encode(paragraph)) stream.push_back(id);
    stream.push_back(tok.eos_id());
    paragraph.clear();
    ++documents;
  };
  std::string line;
  while (std::getline(in, line)) {
    const std::string text = trim(line);
    if (text.empty()) {
      flush();
    } else {
      paragraph += (paragraph.empty() ? "" : " ") + text;
    }
  }
  flush();
  return documents;
}

class TextDataset final : public Dataset {
 public:
  TextDataset(const std::vector<std::string>& files, const Tokenizer& tok, int seq_len) : seq_len_(seq_len) {
    if (seq_len < 1)
      throw InputError("text dataset: seq_len: expected a positive integer, got " + std::to_string(seq_len));
    if (files.empty()) throw InputError("text dataset: no text files given");
    if (tok.eos_id() < 0)
      throw InputError(tok.path() + ": tokenizer: has no </s> (EOS) piece; the text dataset needs one");
    int64_t documents = 0;
    for (const auto& file : files) documents += tokenize_file(file, tok, stream_);
    stream_.shrink_to_fit();
    const auto window = static_cast<int64_t>(seq_len) + 1;
    samples_ = static_cast<int64_t>(stream_.size()) / window;
    if (samples_ == 0) {
      throw InputError(join_names(files) + ": text dataset: too little text: " + std::to_string(stream_.size()) +
                       " tokens found, at least " + std::to_string(window) + " needed for one sample of seq_len " +
                       std::to_string(seq_len));
    }
    describe_ = "text: " + std::to_string(files.size()) + " file(s), " + std::to_string(documents) + " documents, " +
                std::to_string(stream_.size()) + " tokens -> " + std::to_string(samples_) + " samples of seq_len " +
                std::to_string(seq_len) + " (tokenizer " + tok.path() + ", vocab " + std::to_string(tok.vocab_size()) +
                ")";
  }

  int64_t size() const override { return samples_; }
  int seq_len() const override { return seq_len_; }
  std::string describe() const override { return describe_; }

  Sample get(int64_t index) const override {
    EXECUTOR_CHECK(index >= 0 && index < samples_, "text dataset: index out of range");
    const auto start = static_cast<size_t>(index) * (static_cast<size_t>(seq_len_) + 1);
    const auto first = stream_.begin() + static_cast<std::ptrdiff_t>(start);
    Sample s;
    s.input.assign(first, first + seq_len_);
    s.labels.assign(first + 1, first + seq_len_ + 1);
    return s;
  }

 private:
  std::vector<int32_t> stream_;
  int seq_len_;
  int64_t samples_ = 0;
  std::string describe_;
};

}  // namespace

std::unique_ptr<Dataset> make_text_dataset(const std::vector<std::string>& files, const Tokenizer& tok, int seq_len) {
  return std::make_unique<TextDataset>(files, tok, seq_len);
}

void check_vocab(const Tokenizer& tok, int64_t model_vocab, const std::string& tokenizer_path) {
  if (tok.vocab_size() > model_vocab) {
    throw InputError(tokenizer_path + ": tokenizer: vocab_size " + std::to_string(tok.vocab_size()) +
                     " exceeds the model's vocab_size " + std::to_string(model_vocab) +
                     " (expected a tokenizer whose ids all fit the model's embedding)");
  }
}

std::vector<std::string> list_text_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": text corpus: expected a directory of .txt files");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".txt") files.push_back(entry.path().string());
  }
  if (ec) throw InputError(dir + ": text corpus: cannot list the directory (" + ec.message() + ")");
  if (files.empty()) throw InputError(dir + ": text corpus: expected at least one .txt file, found none");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace shardplan::executor::data
