// Tokenizer: training on the shipped corpus, load, encode/decode round trips, determinism, errors.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "executor/data/dataset.hpp"
#include "executor/data/tokenizer.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor::data {
namespace tokenizer_test {  // named, not anonymous: the files share a unity-build unit

using shardplan::testing::TempDir;
using simulator::InputError;

std::string corpus_dir() { return std::string(SHARDPLAN_TEST_DATA_DIR) + "/../../executor/data/corpus"; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("shardplan_tok");
    Tokenizer::train(list_text_files(corpus_dir()), dir_->file("corpus"), 4096);
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(dir_->file("corpus.model")));
  }
  static void TearDownTestSuite() {
    tok_.reset();
    dir_.reset();
  }
  static std::unique_ptr<TempDir> dir_;
  static std::unique_ptr<Tokenizer> tok_;
};
std::unique_ptr<TempDir> TokenizerTest::dir_;
std::unique_ptr<Tokenizer> TokenizerTest::tok_;

TEST_F(TokenizerTest, TrainWritesModelAndVocabFiles) {
  EXPECT_FALSE(read_bytes(dir_->file("corpus.model")).empty());
  // The .vocab file lists one piece per id.
  std::ifstream vocab(dir_->file("corpus.vocab"));
  int lines = 0;
  for (std::string line; std::getline(vocab, line);) ++lines;
  EXPECT_EQ(lines, tok_->vocab_size());
}

TEST_F(TokenizerTest, VocabIsBoundedAndSpecialIdsUsable) {
  EXPECT_LE(tok_->vocab_size(), 4096);
  EXPECT_GT(tok_->vocab_size(), 3 + 256);  // learned pieces beyond <unk>, <s>, </s> and the bytes
  EXPECT_GE(tok_->bos_id(), 0);
  EXPECT_GE(tok_->eos_id(), 0);
  EXPECT_NE(tok_->bos_id(), tok_->eos_id());
  EXPECT_GE(tok_->pad_id(), 0);
  EXPECT_LT(tok_->pad_id(), tok_->vocab_size());
}

TEST_F(TokenizerTest, EncodeDecodeRoundTripsAnyText) {
  const std::vector<std::string> texts = {
      "In the beginning God created the heaven and the earth.",
      "Slow and steady wins the race.",
      "Tabs\tand  double  spaces,\nnew lines\n\nand a blank line.",
      "Digits 0123456789 and symbols #$%^&*{}[]<>~`|\\",
      "Unicode: na\xc3\xafve caf\xc3\xa9, \xe2\x80\x94 dash, \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, \xf0\x9f\x99\x82",
      "x",
  };
  for (const auto& text : texts) {
    const auto ids = tok_->encode(text);
    ASSERT_FALSE(ids.empty()) << text;
    for (const int id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, tok_->vocab_size());
    }
    EXPECT_EQ(tok_->decode(ids), text);
  }
}

TEST_F(TokenizerTest, LearnsPiecesLongerThanBytesOnCorpusText) {
  // Byte fallback alone would give one id per byte; a trained model must do much better on text
  // like its training data.
  const std::string text =
      "And God said, Let there be light: and there was light. The Fox and the Crow sat in the wood.";
  const auto ids = tok_->encode(text);
  EXPECT_LT(static_cast<double>(ids.size()), 0.5 * static_cast<double>(text.size()));
}

TEST_F(TokenizerTest, TrainingTwiceGivesIdenticalModelAndIds) {
  TempDir other("shardplan_tok2");
  Tokenizer::train(list_text_files(corpus_dir()), other.file("again"), 4096);
  EXPECT_EQ(read_bytes(other.file("again.model")), read_bytes(dir_->file("corpus.model")));
  const auto again = Tokenizer::load(other.file("again.model"));
  const std::string text = "Four score and seven years ago our fathers brought forth on this continent.";
  EXPECT_EQ(again.encode(text), tok_->encode(text));
  EXPECT_EQ(again.vocab_size(), tok_->vocab_size());
}

TEST_F(TokenizerTest, VocabSizeIsAnUpperBoundOnATinyCorpus) {
  TempDir tiny("shardplan_tok_tiny");
  const auto file = tiny.write("tiny.txt", "the cat sat on the mat\nthe dog sat on the log\n");
  Tokenizer::train({file}, tiny.file("tiny"), 4096);
  const auto tok = Tokenizer::load(tiny.file("tiny.model"));
  EXPECT_LT(tok.vocab_size(), 4096);
  EXPECT_EQ(tok.decode(tok.encode("the cat sat on the log")), "the cat sat on the log");
}

TEST_F(TokenizerTest, CopiesShareTheModel) {
  const Tokenizer copy = *tok_;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.encode("a copy"), tok_->encode("a copy"));
  EXPECT_EQ(copy.path(), dir_->file("corpus.model"));
}

TEST(TokenizerErrors, MissingModelNamesThePath) {
  const std::string path = "/nonexistent/shardplan/tokenizer.model";
  try {
    (void)Tokenizer::load(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot load"), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, GarbageModelNamesThePath) {
  TempDir dir("shardplan_tok_bad");
  const auto path = dir.write("bad.model", "this is not a protobuf");
  try {
    (void)Tokenizer::load(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what(); }
}

TEST(TokenizerErrors, TrainingOnAMissingFileNamesIt) {
  TempDir dir("shardplan_tok_missing");
  const std::string missing = dir.file("no_such.txt");
  try {
    Tokenizer::train({missing}, dir.file("m"), 512);
    FAIL() << "expected InputError";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what(); }
}

TEST(TokenizerErrors, VocabTooSmallForTheBytePiecesIsAnInputError) {
  TempDir dir("shardplan_tok_small");
  const auto file = dir.write("t.txt", "some text to train on\n");
  EXPECT_THROW(Tokenizer::train({file}, dir.file("m"), 100), InputError);
  EXPECT_THROW(Tokenizer::train({file}, dir.file("m"), 0), InputError);
}

TEST_F(TokenizerTest, DecodeRejectsIdsOutsideTheVocab) {
  EXPECT_THROW((void)tok_->decode({tok_->vocab_size()}), InputError);
  EXPECT_THROW((void)tok_->decode({-1}), InputError);
}

}  // namespace tokenizer_test
}  // namespace shardplan::executor::data
