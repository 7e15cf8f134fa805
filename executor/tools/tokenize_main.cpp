// shardplan-tokenize: sentencepiece work in its own process (sentencepiece bundles a protobuf
// that clashes with LibTorch's, see data/token_cache.hpp).
//   shardplan-tokenize train  --text corpus/ --vocab-size 4096 --out-prefix tok
//   shardplan-tokenize encode --data a.txt,b/ | x.jsonl --tokenizer tok.model --seq-len 128
//                             --out tokens.safetensors [--model-vocab 4096] [--key K]
// Exit codes: 0 ok, 2 bad input (one line "shardplan-tokenize: error: ...").
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "executor/data/dataset.hpp"
#include "executor/data/token_cache.hpp"
#include "executor/data/tokenizer.hpp"
#include "executor/errors.hpp"

namespace data = shardplan::executor::data;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> expand(const std::string& spec) {
  std::vector<std::string> files;
  std::stringstream ss(spec);
  for (std::string f; std::getline(ss, f, ',');) {
    if (f.empty()) continue;
    if (fs::is_directory(f)) {
      for (auto& x : data::list_text_files(f)) files.push_back(x);
    } else {
      files.push_back(f);
    }
  }
  return files;
}

bool is_jsonl(const std::string& s) { return s.size() > 6 && s.ends_with(".jsonl"); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shardplan-tokenize: train a sentencepiece tokenizer, or tokenise data into a token cache"};
  app.require_subcommand(1);
  std::string text, prefix, data_spec, tokenizer, out, key;
  int vocab = 4096, seq_len = 0;
  int64_t model_vocab = 0;
  auto* train = app.add_subcommand("train", "Train a BPE tokenizer (byte fallback) on text files");
  train->add_option("--text", text, "Text files or folders of .txt, comma-separated")->required();
  train->add_option("--vocab-size", vocab, "Upper bound of the vocabulary");
  train->add_option("--out-prefix", prefix, "Writes <prefix>.model and <prefix>.vocab")->required();
  auto* encode = app.add_subcommand("encode", "Tokenise text or Alpaca JSONL into fixed-length samples");
  encode->add_option("--data", data_spec, "Text files/folders (comma-separated) or one .jsonl")->required();
  encode->add_option("--tokenizer", tokenizer, "sentencepiece tokenizer.model")->required();
  encode->add_option("--seq-len", seq_len, "Tokens per sample")->required();
  encode->add_option("--out", out, "Token cache (.safetensors)")->required();
  encode->add_option("--model-vocab", model_vocab, "Check every id fits this vocabulary");
  encode->add_option("--key", key, "Recorded in the cache's metadata (what produced it)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (train->parsed()) {
      data::Tokenizer::train(expand(text), prefix, vocab);
      const auto tok = data::Tokenizer::load(prefix + ".model");
      std::cerr << "shardplan-tokenize: " << prefix << ".model: " << tok.vocab_size() << " pieces\n";
      return 0;
    }
    const auto tok = data::Tokenizer::load(tokenizer);
    if (model_vocab > 0) data::check_vocab(tok, model_vocab, tokenizer);
    const auto ds = is_jsonl(data_spec) ? data::make_jsonl_dataset(data_spec, tok, seq_len)
                                        : data::make_text_dataset(expand(data_spec), tok, seq_len);
    data::write_token_cache(*ds, out, {{"key", key}, {"vocab_size", std::to_string(tok.vocab_size())}});
    std::cerr << "shardplan-tokenize: " << out << ": " << ds->size() << " samples of " << seq_len << " tokens ("
              << ds->describe() << ")\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "shardplan-tokenize: error: " << e.what() << "\n";
    return 2;
  }
}
