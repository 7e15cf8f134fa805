// Alpaca-style instruction data (JSONL; a single JSON array as in the original alpaca_data.json is
// accepted too). Response-only loss: prompt and padding labels are kIgnoreLabel.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executor/data/dataset.hpp"
#include "executor/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::executor::data {
namespace {

using nlohmann::json;

// Stanford Alpaca (tatsu-lab/stanford_alpaca, train.py PROMPT_DICT), split around its fields.
constexpr const char* kHeadInput =
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n### Instruction:\n";
constexpr const char* kHeadNoInput =
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n### Instruction:\n";
constexpr const char* kInputMarker = "\n\n### Input:\n";
constexpr const char* kResponseMarker = "\n\n### Response:\n";

// One example's fields; `where` is "<file>:<line>" (or "<file>: element <i>") for errors.
struct Example {
  std::string instruction, input, output;
};

std::string string_field(const json& obj, const char* key, bool required, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || (!required && it->is_null())) {
    if (required) throw InputError(where + ": field '" + key + "': missing (expected a string)");
    return {};
  }
  if (!it->is_string()) {
    throw InputError(where + ": field '" + key + "': expected a string, got " + std::string(it->type_name()));
  }
  return it->get<std::string>();
}

Example parse_example(const json& obj, const std::string& where) {
  if (!obj.is_object()) {
    throw InputError(where +
                     ": expected a JSON object with \"instruction\", \"output\" (and optional \"input\"), got " +
                     std::string(obj.type_name()));
  }
  return {string_field(obj, "instruction", true, where), string_field(obj, "input", false, where),
          string_field(obj, "output", true, where)};
}

std::vector<Example> read_examples(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": jsonl dataset: cannot open the file");
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  std::vector<Example> examples;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {  // one JSON array of objects
    json array;
    try {
      array = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, or out_of_range 406 (a number beyond double)
      throw InputError(file + ": not valid JSON (" + simulator::json_error_text(e) + ")");
    }
    for (size_t i = 0; i < array.size(); ++i)
      examples.push_back(parse_example(array[i], file + ": element " + std::to_string(i)));
    return examples;
  }
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(number);
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::exception& e) {
      throw InputError(where + ": not valid JSON (" + simulator::json_error_text(e) + ")");
    }
    examples.push_back(parse_example(obj, where));
  }
  return examples;
}

class JsonlDataset final : public Dataset {
 public:
  JsonlDataset(const std::string& file, const Tokenizer& tok, int seq_len) : seq_len_(seq_len), pad_(tok.pad_id()) {
    if (seq_len < 1)
      throw InputError(file + ": jsonl dataset: seq_len: expected a positive integer, got " + std::to_string(seq_len));
    if (tok.eos_id() < 0)
      throw InputError(tok.path() + ": tokenizer: has no </s> (EOS) piece; the jsonl dataset needs one");
    const auto examples = read_examples(file);
    if (examples.empty()) throw InputError(file + ": no examples (expected one JSON object per line)");
    for (const auto& ex : examples) add(ex, tok);
    if (offsets_.empty()) {
      throw InputError(file + ": every example's prompt fills seq_len " + std::to_string(seq_len) +
                       "; no response token left to train on (expected a larger seq_len)");
    }
    offsets_.push_back(tokens_.size());
    describe_ = "alpaca jsonl " + file + ": " + std::to_string(size()) + " examples (" + std::to_string(skipped_) +
                " skipped: prompt fills seq_len), " + std::to_string(truncated_) + " truncated, seq_len " +
                std::to_string(seq_len) + " (tokenizer " + tok.path() + ")";
  }

  int64_t size() const override { return static_cast<int64_t>(prompt_end_.size()); }
  int seq_len() const override { return seq_len_; }
  std::string describe() const override { return describe_; }

  Sample get(int64_t index) const override {
    EXECUTOR_CHECK(index >= 0 && index < size(), "jsonl dataset: index out of range");
    const auto i = static_cast<size_t>(index);
    const int32_t* toks = tokens_.data() + offsets_[i];
    const auto length = static_cast<int64_t>(offsets_[i + 1] - offsets_[i]);
    const int64_t prompt_end = prompt_end_[i];
    Sample s;
    s.input.resize(static_cast<size_t>(seq_len_));
    s.labels.resize(static_cast<size_t>(seq_len_));
    for (int64_t t = 0; t < seq_len_; ++t) {
      s.input[static_cast<size_t>(t)] = t < length ? toks[t] : pad_;
      const bool target = t + 1 < length && t + 1 >= prompt_end;
      s.labels[static_cast<size_t>(t)] = target ? toks[t + 1] : kIgnoreLabel;
    }
    return s;
  }

 private:
  // Tokenises one example, truncated to seq_len + 1 tokens; skips it if no response token fits.
  void add(const Example& ex, const Tokenizer& tok) {
    std::vector<int32_t> ids;
    if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    for (const int id : tok.encode(alpaca_prompt(ex.instruction, ex.input))) ids.push_back(id);
    const auto prompt_end = static_cast<int64_t>(ids.size());
    for (const int id : tok.encode(ex.output)) ids.push_back(id);
    ids.push_back(tok.eos_id());
    const auto window = static_cast<size_t>(seq_len_) + 1;
    if (prompt_end >= static_cast<int64_t>(window)) {
      ++skipped_;
      return;
    }
    if (ids.size() > window) {
      ids.resize(window);
      ++truncated_;
    }
    offsets_.push_back(tokens_.size());
    prompt_end_.push_back(prompt_end);
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  }

  int seq_len_;
  int64_t pad_;
  std::vector<int32_t> tokens_;      // all examples' tokens, back to back
  std::vector<size_t> offsets_;      // example i = tokens_[offsets_[i], offsets_[i+1])
  std::vector<int64_t> prompt_end_;  // index of the first response token of example i
  int64_t skipped_ = 0, truncated_ = 0;
  std::string describe_;
};

}  // namespace

std::string alpaca_prompt(const std::string& instruction, const std::string& input) {
  if (input.empty()) return kHeadNoInput + instruction + kResponseMarker;
  return kHeadInput + instruction + kInputMarker + input + kResponseMarker;
}

std::unique_ptr<Dataset> make_jsonl_dataset(const std::string& file, const Tokenizer& tok, int seq_len) {
  return std::make_unique<JsonlDataset>(file, tok, seq_len);
}

}  // namespace shardplan::executor::data
