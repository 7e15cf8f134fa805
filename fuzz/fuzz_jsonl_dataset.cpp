// Fuzz target: an Alpaca-style instruction dataset (JSONL, or one JSON array) as shardrun's
// tokenizing step reads it (data::make_jsonl_dataset): every line parsed, fields checked,
// prompt and response tokenised with a SentencePiece BPE model trained once at start-up on a
// few lines of text (byte fallback, so any UTF-8 or binary input encodes), truncated, padded,
// labels masked; then every sample is read.
#include <string>

#include "executor/data/dataset.hpp"
#include "executor/data/tokenizer.hpp"
#include "fuzz_file.hpp"

namespace {

const shardplan::executor::data::Tokenizer& tokenizer() {
  namespace d = shardplan::executor::data;
  static const d::Tokenizer tok = [] {
    const std::string text =
        "Below is an instruction that describes a task.\nWrite a response that appropriately completes the request.\n"
        "Give three tips for staying healthy.\nEat a balanced diet and make sure to include plenty of fruits.\n"
        "Translate the sentence into French: the cat sleeps.\nLe chat dort.\n";
    const std::string file =
        shardplan::fuzz::write_input("tok/text.txt", reinterpret_cast<const uint8_t*>(text.data()), text.size());
    const std::string prefix = (shardplan::fuzz::scratch_dir() / "tok" / "fuzz").string();
    d::Tokenizer::train({file}, prefix, 320);
    return d::Tokenizer::load(prefix + ".model");
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = shardplan::executor::data;
  const d::Tokenizer& tok = tokenizer();
  return shardplan::fuzz::run_file_reader("input.jsonl", data, size, [&tok](const std::string& path) {
    const auto ds = d::make_jsonl_dataset(path, tok, 32);
    for (int64_t i = 0; i < ds->size(); ++i) {
      const d::Sample s = ds->get(i);
      if (s.input.size() != 32 || s.labels.size() != 32) __builtin_trap();
    }
    (void)ds->describe();
  });
}
