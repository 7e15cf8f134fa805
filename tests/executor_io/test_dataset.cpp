// Datasets: text windows tile the token stream, Alpaca JSONL masks the prompt, synthetic data is
// deterministic and learnable, check_vocab, list_text_files, and the errors' messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "executor/data/dataset.hpp"
#include "executor/data/tokenizer.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor::data {
namespace dataset_test {  // named, not anonymous: the files share a unity-build unit

using shardplan::testing::TempDir;
using simulator::InputError;

const std::string kAlpaca = std::string(SHARDPLAN_TEST_DATA_DIR) + "/alpaca_tiny.jsonl";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class DatasetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("shardplan_data");
    Tokenizer::train(list_text_files(std::string(SHARDPLAN_TEST_DATA_DIR) + "/../../executor/data/corpus"),
                     dir_->file("tok"), 4096);
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(dir_->file("tok.model")));
  }
  static void TearDownTestSuite() {
    tok_.reset();
    dir_.reset();
  }
  static std::unique_ptr<TempDir> dir_;
  static std::unique_ptr<Tokenizer> tok_;
};
std::unique_ptr<TempDir> DatasetTest::dir_;
std::unique_ptr<Tokenizer> DatasetTest::tok_;

// ---- text -----------------------------------------------------------------------------------

TEST_F(DatasetTest, TextWindowsTileTheTokenStream) {
  TempDir dir("shardplan_text");
  // Two files; paragraphs are separated by blank lines, wrapped lines are joined with a space.
  const auto a = dir.write("a.txt", "The north wind and the sun\nhad a quarrel.\n\n  Which was stronger?\n");
  const auto b = dir.write("b.txt", "\n\nA traveler passed by,\nwrapped in a cloak.\n\n\nThe sun won.");
  std::vector<int64_t> expected;
  for (const char* doc : {"The north wind and the sun had a quarrel.", "Which was stronger?",
                          "A traveler passed by, wrapped in a cloak.", "The sun won."}) {
    for (const int id : tok_->encode(doc)) expected.push_back(id);
    expected.push_back(tok_->eos_id());
  }
  const int seq_len = 7;
  const auto ds = make_text_dataset({a, b}, *tok_, seq_len);
  EXPECT_EQ(ds->seq_len(), seq_len);
  ASSERT_EQ(ds->size(), static_cast<int64_t>(expected.size()) / (seq_len + 1));
  ASSERT_GE(ds->size(), 2);
  for (int64_t i = 0; i < ds->size(); ++i) {
    const auto s = ds->get(i);
    ASSERT_EQ(s.input.size(), static_cast<size_t>(seq_len));
    ASSERT_EQ(s.labels.size(), static_cast<size_t>(seq_len));
    for (int t = 0; t < seq_len; ++t) {
      const auto at = static_cast<size_t>(i * (seq_len + 1) + t);
      EXPECT_EQ(s.input[static_cast<size_t>(t)], expected[at]) << i << "," << t;
      EXPECT_EQ(s.labels[static_cast<size_t>(t)], expected[at + 1]) << i << "," << t;
    }
  }
}

TEST_F(DatasetTest, TextOnTheCorpusIsShiftedByOneDeterministicAndInRange) {
  const auto files = list_text_files(std::string(SHARDPLAN_TEST_DATA_DIR) + "/../../executor/data/corpus");
  const auto ds = make_text_dataset(files, *tok_, 64);
  ASSERT_GT(ds->size(), 100);  // the shipped corpus is ~120 KB of text
  const auto again = make_text_dataset(files, *tok_, 64);
  ASSERT_EQ(again->size(), ds->size());
  for (const int64_t i : {int64_t{0}, ds->size() / 2, ds->size() - 1}) {
    const auto s = ds->get(i);
    EXPECT_EQ(s.input, again->get(i).input);
    EXPECT_EQ(s.labels, again->get(i).labels);
    for (size_t t = 0; t + 1 < s.input.size(); ++t) EXPECT_EQ(s.labels[t], s.input[t + 1]);
    for (const auto id : s.input) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, tok_->vocab_size());
    }
  }
  EXPECT_TRUE(contains(ds->describe(), std::to_string(ds->size()))) << ds->describe();
}

TEST_F(DatasetTest, TooLittleTextNamesFilesAndTokenCounts) {
  TempDir dir("shardplan_text_short");
  const auto file = dir.write("short.txt", "Just a few words.\n");
  const auto found = tok_->encode("Just a few words.").size() + 1;  // + EOS
  const int seq_len = static_cast<int>(found) + 5;
  try {
    (void)make_text_dataset({file}, *tok_, seq_len);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, file)) << what;
    EXPECT_TRUE(contains(what, std::to_string(found) + " tokens")) << what;
    EXPECT_TRUE(contains(what, std::to_string(seq_len + 1))) << what;
  }
}

TEST_F(DatasetTest, TextErrors) {
  EXPECT_THROW((void)make_text_dataset({"/nonexistent/shardplan.txt"}, *tok_, 8), InputError);
  EXPECT_THROW((void)make_text_dataset({}, *tok_, 8), InputError);
  TempDir dir("shardplan_text_err");
  EXPECT_THROW((void)make_text_dataset({dir.write("a.txt", "some words here")}, *tok_, 0), InputError);
}

// ---- Alpaca JSONL -------------------------------------------------------------------------------

TEST(AlpacaPrompt, IsTheStanfordTemplate) {
  EXPECT_EQ(alpaca_prompt("Add 2 and 3.", ""),
            "Below is an instruction that describes a task. Write a response that appropriately completes the "
            "request.\n\n### Instruction:\nAdd 2 and 3.\n\n### Response:\n");
  EXPECT_EQ(alpaca_prompt("Translate.", "Bonjour {instruction}"),
            "Below is an instruction that describes a task, paired with an input that provides further context. "
            "Write a response that appropriately completes the request.\n\n### Instruction:\nTranslate.\n\n"
            "### Input:\nBonjour {instruction}\n\n### Response:\n");
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

TEST_F(DatasetTest, JsonlMasksThePromptAndTrainsOnTheResponse) {
  const auto examples = read_jsonl(kAlpaca);
  ASSERT_GE(examples.size(), 30u);
  const int seq_len = 512;  // long enough that nothing is truncated
  const auto ds = make_jsonl_dataset(kAlpaca, *tok_, seq_len);
  ASSERT_EQ(ds->size(), static_cast<int64_t>(examples.size()));
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& ex = examples[i];
    std::vector<int> prompt = {tok_->bos_id()};
    for (const int id : tok_->encode(alpaca_prompt(ex["instruction"], ex.value("input", std::string()))))
      prompt.push_back(id);
    const auto response = tok_->encode(ex["output"].get<std::string>());
    const size_t length = prompt.size() + response.size() + 1;
    ASSERT_LE(length, static_cast<size_t>(seq_len));
    const auto s = ds->get(static_cast<int64_t>(i));
    std::vector<int> trained;
    for (size_t t = 0; t < static_cast<size_t>(seq_len); ++t) {
      if (t < prompt.size()) { EXPECT_EQ(s.input[t], prompt[t]) << i << "," << t; }
      if (t >= length) { EXPECT_EQ(s.input[t], tok_->pad_id()) << i << "," << t; }
      if (t + 1 < prompt.size() || t + 1 >= length) {
        EXPECT_EQ(s.labels[t], kIgnoreLabel) << "prompt/padding label not masked: " << i << "," << t;
      } else {
        EXPECT_EQ(s.labels[t], s.input[t + 1]) << i << "," << t;  // t + 1 < length <= seq_len
        trained.push_back(static_cast<int>(s.labels[t]));
      }
    }
    // Exactly the response and EOS carry loss, and they decode to the output text.
    ASSERT_EQ(trained.size(), response.size() + 1) << i;
    EXPECT_EQ(trained.back(), tok_->eos_id());
    trained.pop_back();
    EXPECT_EQ(tok_->decode(trained), ex["output"].get<std::string>()) << i;
  }
}

TEST_F(DatasetTest, JsonlTruncatesAndSkipsExamplesWhosePromptFillsTheWindow) {
  const auto examples = read_jsonl(kAlpaca);
  size_t shortest = SIZE_MAX;
  for (const auto& ex : examples) {
    shortest =
        std::min(shortest, 1 + tok_->encode(alpaca_prompt(ex["instruction"], ex.value("input", std::string()))).size());
  }
  const int seq_len = static_cast<int>(shortest) + 2;
  const auto ds = make_jsonl_dataset(kAlpaca, *tok_, seq_len);
  EXPECT_GE(ds->size(), 1);
  EXPECT_LT(ds->size(), static_cast<int64_t>(examples.size()));
  for (int64_t i = 0; i < ds->size(); ++i) {
    const auto s = ds->get(i);
    ASSERT_EQ(s.input.size(), static_cast<size_t>(seq_len));
    int trained = 0;
    for (const auto label : s.labels) trained += label != kIgnoreLabel;
    EXPECT_GE(trained, 1) << "sample " << i << " has no response token";
  }
  EXPECT_THROW((void)make_jsonl_dataset(kAlpaca, *tok_, 4), InputError);  // every prompt is longer
}

TEST_F(DatasetTest, JsonlEmptyInputUsesTheNoInputTemplateAndArraysWork) {
  TempDir dir("shardplan_jsonl");
  const auto jsonl = dir.write("a.jsonl",
                               "{\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"Hi!\"}\n"
                               "{\"instruction\": \"Say hi.\", \"output\": \"Hi!\"}\n"
                               "{\"instruction\": \"Say hi.\", \"input\": null, \"output\": \"Hi!\"}\n");
  const auto array = dir.write("a.json", "[{\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"Hi!\"}]");
  const auto ds = make_jsonl_dataset(jsonl, *tok_, 128);
  const auto ar = make_jsonl_dataset(array, *tok_, 128);
  ASSERT_EQ(ds->size(), 3);
  ASSERT_EQ(ar->size(), 1);
  for (int64_t i = 1; i < 3; ++i) {
    EXPECT_EQ(ds->get(i).input, ds->get(0).input);
    EXPECT_EQ(ds->get(i).labels, ds->get(0).labels);
  }
  EXPECT_EQ(ar->get(0).input, ds->get(0).input);
}

TEST_F(DatasetTest, JsonlBadLinesNameFileLineAndField) {
  TempDir dir("shardplan_jsonl_bad");
  const std::string good = R"({"instruction": "Do it.", "output": "Done."})";
  const auto expect_error = [&](const std::string& name, const std::string& text, const std::string& where,
                                const std::string& what) {
    const auto file = dir.write(name, text);
    try {
      (void)make_jsonl_dataset(file, *tok_, 64);
      ADD_FAILURE() << "expected InputError for " << name;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, file + where)) << msg;
      EXPECT_TRUE(contains(msg, what)) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    }
  };
  expect_error("output.jsonl", good + "\n\n" + R"({"instruction": "x", "output": 5})" + "\n",
               ":3:", "field 'output': expected a string");
  expect_error("missing.jsonl",
               R"({"output": "y"})"
               "\n",
               ":1:", "field 'instruction'");
  expect_error("input.jsonl", good + "\n" + R"({"instruction": "x", "input": [1], "output": "y"})",
               ":2:", "field 'input': expected a string");
  expect_error("syntax.jsonl", good + "\n" + good + "\n{not json\n", ":3:", "not valid JSON");
  expect_error("array.jsonl", "[1, 2]\n", ": element 0", "expected a JSON object");
  expect_error("scalar.jsonl", "42\n", ":1:", "expected a JSON object");
  expect_error("empty.jsonl", "\n\n", "", "no examples");
  EXPECT_THROW((void)make_jsonl_dataset(dir.file("absent.jsonl"), *tok_, 64), InputError);
}

// ---- synthetic --------------------------------------------------------------------------------

TEST(Synthetic, DeterministicInRangeAndLearnable) {
  const int vocab = 97, seq_len = 40;
  const auto a = make_synthetic_dataset(500, seq_len, vocab, 3);
  const auto b = make_synthetic_dataset(500, seq_len, vocab, 3);
  const auto c = make_synthetic_dataset(500, seq_len, vocab, 4);
  ASSERT_EQ(a->size(), 500);
  std::set<int64_t> strides, starts;
  bool seed_matters = false;
  for (int64_t i = 0; i < a->size(); ++i) {
    const auto s = a->get(i);
    EXPECT_EQ(s.input, b->get(i).input);
    EXPECT_EQ(s.labels, b->get(i).labels);
    seed_matters = seed_matters || s.input != c->get(i).input;
    ASSERT_EQ(s.input.size(), static_cast<size_t>(seq_len));
    const int64_t stride = ((s.labels[0] - s.input[0]) % vocab + vocab) % vocab;
    for (size_t t = 0; t < s.input.size(); ++t) {
      EXPECT_GE(s.input[t], 0);
      EXPECT_LT(s.input[t], vocab);
      EXPECT_EQ(s.labels[t], (s.input[t] + stride) % vocab) << "not a progression: " << i;  // predictable
      if (t + 1 < s.input.size()) { EXPECT_EQ(s.labels[t], s.input[t + 1]); }
    }
    strides.insert(stride);
    starts.insert(s.input[0]);
  }
  EXPECT_TRUE(seed_matters);
  EXPECT_GE(strides.size(), 3u);  // a handful of strides, all used
  EXPECT_LE(strides.size(), std::size(kSyntheticStrides));
  EXPECT_GE(starts.size(), 50u);  // starts spread over the vocabulary
  EXPECT_TRUE(contains(a->describe(), "synthetic")) << a->describe();
}

TEST(Synthetic, BadArgumentsAreInputErrors) {
  EXPECT_THROW((void)make_synthetic_dataset(0, 8, 16, 0), InputError);
  EXPECT_THROW((void)make_synthetic_dataset(4, 0, 16, 0), InputError);
  EXPECT_THROW((void)make_synthetic_dataset(4, 8, 1, 0), InputError);
}

// ---- check_vocab, list_text_files -------------------------------------------------------------

TEST_F(DatasetTest, CheckVocabRejectsATokenizerBiggerThanTheModel) {
  const int64_t v = tok_->vocab_size();
  EXPECT_NO_THROW(check_vocab(*tok_, v, "tok.model"));
  EXPECT_NO_THROW(check_vocab(*tok_, v + 100, "tok.model"));
  try {
    check_vocab(*tok_, v - 1, "/path/to/tok.model");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "/path/to/tok.model")) << what;
    EXPECT_TRUE(contains(what, std::to_string(v))) << what;
    EXPECT_TRUE(contains(what, std::to_string(v - 1))) << what;
  }
}

TEST(ListTextFiles, SortedTxtOnly) {
  TempDir dir("shardplan_list");
  dir.write("b.txt", "b");
  dir.write("a.txt", "a");
  dir.write("notes.md", "m");
  EXPECT_EQ(list_text_files(dir.path().string()), (std::vector<std::string>{dir.file("a.txt"), dir.file("b.txt")}));
  TempDir empty("shardplan_list_empty");
  EXPECT_THROW((void)list_text_files(empty.path().string()), InputError);
  EXPECT_THROW((void)list_text_files(dir.file("a.txt")), InputError);
}

}  // namespace dataset_test
}  // namespace shardplan::executor::data
