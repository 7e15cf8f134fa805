// What shardrun reads back from files it did not necessarily write itself: the trainer state in a
// checkpoint manifest, and a token cache given as `--data x.safetensors`. Bad fields get a
// one-line InputError naming the file and the field (found while fuzzing: a manifest without
// "state" used to escape as json::out_of_range, and out-of-vocabulary ids reached the embedding).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/data/dataset.hpp"
#include "executor/data/token_cache.hpp"
#include "executor/io/checkpoint_state.hpp"
#include "executor/io/safetensors.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor {
namespace checkpoint_state_and_cache_test {  // named, not anonymous: the files share a unity-build unit

using nlohmann::json;
using shardplan::simulator::InputError;
using shardplan::testing::TempDir;

json layout() { return {{"tp", 2}, {"dp", 1}, {"model", "tiny-gpt"}}; }

json manifest_with(json state) {
  return {{"schema", "shardplan.checkpoint/1"}, {"step", 7}, {"shards", json::array()}, {"state", std::move(state)}};
}

json good_state() {
  return {{"step", 7}, {"adam_step", 6}, {"loss_scale", 65536.0}, {"good_steps", 3}, {"layout", layout()}};
}

std::string error_of(const json& manifest) {
  try {
    (void)io::parse_checkpoint_state(manifest, "ckpt/step-00000007", layout());
  } catch (const InputError& e) { return e.what(); }
  return "";
}

TEST(CheckpointState, ReadsWhatTheCheckpointerWrites) {
  EXPECT_EQ(io::to_json(io::parse_checkpoint_state(manifest_with(good_state()), "d", layout())), good_state());
  const auto st = io::parse_checkpoint_state(manifest_with(good_state()), "d", layout());
  EXPECT_EQ(st.step, 7);
  EXPECT_EQ(st.adam_step, 6);
  EXPECT_DOUBLE_EQ(st.loss_scale, 65536.0);
  EXPECT_EQ(st.good_steps, 3);
  EXPECT_EQ(st.layout, layout());
}

TEST(CheckpointState, EachBadFieldIsNamed) {
  EXPECT_NE(error_of({{"schema", "shardplan.checkpoint/1"}}).find("field 'state'"), std::string::npos);
  EXPECT_NE(error_of(manifest_with("x")).find("field 'state'"), std::string::npos);
  for (const char* key : {"step", "adam_step", "good_steps", "loss_scale", "layout"}) {
    json st = good_state();
    st.erase(key);
    EXPECT_NE(error_of(manifest_with(st)).find(std::string("'state.") + key + "'"), std::string::npos) << key;
  }
  json st = good_state();
  st["adam_step"] = -1;
  EXPECT_NE(error_of(manifest_with(st)).find("'state.adam_step': expected an integer >= 0, got -1"), std::string::npos);
  st = good_state();
  st["step"] = 1.5;
  EXPECT_NE(error_of(manifest_with(st)).find("'state.step'"), std::string::npos);
  st = good_state();
  st["loss_scale"] = "big";
  EXPECT_NE(error_of(manifest_with(st)).find("'state.loss_scale'"), std::string::npos);
  st = good_state();
  st["layout"]["tp"] = 4;
  EXPECT_NE(error_of(manifest_with(st)).find("resharding a checkpoint is not supported"), std::string::npos);
}

// A token cache with the given ids (one sample of 4 tokens).
std::string cache_file(const TempDir& dir, const std::vector<int32_t>& input, const std::vector<int32_t>& labels) {
  io::SafetensorsWriter w;
  const int64_t s = static_cast<int64_t>(input.size());
  w.add("input", io::DType::I32, {1, s}, input.data(), input.size() * sizeof(int32_t));
  w.add("labels", io::DType::I32, {1, s}, labels.data(), labels.size() * sizeof(int32_t));
  const std::string path = dir.file("cache.safetensors");
  w.write(path);
  return path;
}

TEST(TokenCache, LoadsIdsInsideTheVocabularyAndIgnoredLabels) {
  const TempDir dir("cache");
  const auto path = cache_file(dir, {0, 5, 9, 3}, {5, 9, 3, data::kIgnoreLabel});
  const auto ds = data::load_token_cache(path, 10);
  ASSERT_EQ(ds->size(), 1);
  EXPECT_EQ(ds->get(0).input, (std::vector<int64_t>{0, 5, 9, 3}));
  EXPECT_EQ(ds->get(0).labels, (std::vector<int64_t>{5, 9, 3, data::kIgnoreLabel}));
}

TEST(TokenCache, RefusesIdsOutsideTheModelsVocabulary) {
  const TempDir dir("cache");
  auto message = [&](const std::vector<int32_t>& in, const std::vector<int32_t>& lab, int64_t vocab) {
    try {
      (void)data::load_token_cache(cache_file(dir, in, lab), vocab);
    } catch (const InputError& e) { return std::string(e.what()); }
    return std::string();
  };
  EXPECT_NE(message({0, 5, 10, 3}, {5, 9, 3, 1}, 10).find("tensor 'input': sample 0, position 2: token id 10"),
            std::string::npos);
  EXPECT_NE(message({0, 5, 9, 3}, {5, -7, 3, 1}, 10).find("tensor 'labels': sample 0, position 1: token id -7"),
            std::string::npos);
  EXPECT_NE(message({0, 5, 9, data::kIgnoreLabel}, {5, 9, 3, 1}, 10).find("tensor 'input'"), std::string::npos);
  EXPECT_EQ(message({0, 5, 9, 3}, {5, 9, 3, 1}, 10), "");
}

}  // namespace checkpoint_state_and_cache_test
}  // namespace shardplan::executor
