// End-to-end tests of the `shardplan` CLI: run the real binary as a subprocess and check its
// exit code, stdout and stderr separately.
//
// Bad input must produce exactly one line on stderr that names the offending flag or profile
// field and says what was expected, exit code 2, and nothing on stdout.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

// ---------------------------------------------------------------------------------------------
// Bad input: one clear line, exit code 2
// ---------------------------------------------------------------------------------------------

TEST(CliBadInput, UnknownModel) {
  expect_one_line_error({"simulate", "--model", "no-such-model", "--hardware", "p4d.24xlarge"},
                        {"--model", "no-such-model"});
}

TEST(CliBadInput, ModelFileThatDoesNotExist) {
  TempDir dir;
  const std::string missing = (fs::path(dir.write("placeholder", "")).parent_path() / "missing.json").string();
  expect_one_line_error({"simulate", "--model", missing, "--hardware", "p4d.24xlarge"}, {"--model", missing},
                        /*must_say_expected=*/false);
}

TEST(CliBadInput, UnknownHardware) {
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "no-such-box"},
                        {"--hardware", "no-such-box"});
}

TEST(CliBadInput, ProfileWithNegativeMemoryBandwidth) {
  TempDir dir;
  const std::string path = dir.write_json(
      "neg_bw.json", {{"base", "p4d.24xlarge"}, {"name", "neg-bw"}, {"device", {{"memory_bandwidth_GBps", -5}}}});
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path},
                        {path, "device.memory_bandwidth_GBps"});
}

TEST(CliBadInput, ProfileWithNegativeNetworkLatency) {
  TempDir dir;
  const std::string path =
      dir.write_json("neg_lat.json", {{"base", "p4d.24xlarge"}, {"network", {{"latency_us", -1}}}});
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "network.latency_us"});
}

TEST(CliBadInput, ProfileWithNegativeDeviceCount) {
  TempDir dir;
  const std::string path =
      dir.write_json("neg_n.json", {{"base", "p5.48xlarge"}, {"node", {{"devices_per_node", -8}}}});
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "node.devices_per_node"});
}

TEST(CliBadInput, ProfileMissingMemoryBandwidth) {
  TempDir dir;
  json j = builtin_profile("p4d.24xlarge");
  ASSERT_TRUE(j["device"].contains("memory_bandwidth_GBps"));
  j["device"].erase("memory_bandwidth_GBps");
  const std::string path = dir.write_json("no_bw.json", j);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "device.memory_bandwidth_"});
}

TEST(CliBadInput, ProfileMissingNetworkLatency) {
  TempDir dir;
  json j = builtin_profile("p4d.24xlarge");
  ASSERT_TRUE(j["network"].contains("latency_us"));
  j["network"].erase("latency_us");
  const std::string path = dir.write_json("no_lat.json", j);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "network.latency_"});
}

TEST(CliBadInput, ProfileMissingDevicesPerNode) {
  TempDir dir;
  json j = builtin_profile("g5.48xlarge");
  ASSERT_TRUE(j["node"].contains("devices_per_node"));
  j["node"].erase("devices_per_node");
  const std::string path = dir.write_json("no_n.json", j);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "node.devices_per_node"});
}

TEST(CliBadInput, ProfileMissingViaNullInOverlay) {
  // A JSON merge patch with null removes the field from the base profile.
  TempDir dir;
  const std::string path =
      dir.write_json("null_lat.json", {{"base", "p4de.24xlarge"}, {"network", {{"latency_us", nullptr}}}});
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "network.latency_"});
}

TEST(CliBadInput, MalformedHardwareJson) {
  TempDir dir;
  const std::string path = dir.write("broken.json", "{\n  \"name\": \"broken\",\n  \"device\": {\n");
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", path}, {path, "invalid JSON"},
                        /*must_say_expected=*/false);
}

TEST(CliBadInput, MalformedModelJson) {
  TempDir dir;
  const std::string path = dir.write("broken_model.json", "{\"num_layers\": 32,, }\n");
  expect_one_line_error({"simulate", "--model", path, "--hardware", "p4d.24xlarge"}, {path, "invalid JSON"},
                        /*must_say_expected=*/false);
}

TEST(CliBadInput, TpNotDividingAttentionHeads) {
  // 5 nodes x 8 = 40 devices = tp 5 x dp 8, so only the head count is wrong (llama2-7b has 32 heads).
  expect_one_line_error(
      {"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--nodes", "5", "--tp", "5", "--dp", "8"},
      {"--tp", "32"});
}

TEST(CliBadInput, TpNotDividingKeyValueHeads) {
  // llama2-70b: 64 attention heads but only 8 key/value heads; tp 16 divides the former only.
  expect_one_line_error(
      {"simulate", "--model", "llama2-70b", "--hardware", "p4d.24xlarge", "--nodes", "2", "--tp", "16"}, {"--tp", "8"});
}

TEST(CliBadInput, TpPpDpNotEqualToDevicesWithExplicitDp) {
  // 2 x 2 x 4 = 16 but one p4d node has 8 devices.
  expect_one_line_error(
      {"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--tp", "2", "--pp", "2", "--dp", "4"},
      {"--dp", "8"});
}

TEST(CliBadInput, TpPpNotDividingDevicesWithoutDp) {
  // tp x pp = 3 cannot tile 8 devices whatever dp is.
  expect_one_line_error({"simulate", "--model", "tiny-gpt", "--hardware", "p4d.24xlarge", "--tp", "1", "--pp", "3"},
                        {"--pp", "8"});
}

TEST(CliBadInput, NonPositiveTp) {
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--tp", "0"}, {"--tp"});
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--tp", "-2"}, {"--tp"});
}

TEST(CliBadInput, ShardingDegreeNotDividingDp) {
  expect_one_line_error(
      {"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--zero", "3", "--sharding-degree", "3"},
      {"--sharding-degree", "--dp"});
}

TEST(CliBadInput, ShardingDegreeLargerThanDp) {
  expect_one_line_error(
      {"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--zero", "1", "--sharding-degree", "16"},
      {"--sharding-degree", "--dp"});
}

TEST(CliBadInput, LoraTargetNotInModel) {
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--lora-rank", "8",
                         "--lora-targets", "q_proj,foo_proj"},
                        {"--lora-targets", "foo_proj"});
}

TEST(CliBadInput, LoraTargetOfAnotherFamily) {
  // q_proj is a llama name; GPT-2 has c_attn/c_proj/c_fc.
  expect_one_line_error(
      {"simulate", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--lora-rank", "4", "--lora-targets", "q_proj"},
      {"--lora-targets", "q_proj", "c_attn"});
}

TEST(CliBadInput, InvalidChoices) {
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--schedule", "foo"},
                        {"--schedule", "foo"}, /*must_say_expected=*/false);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--recompute", "most"},
                        {"--recompute", "most"}, /*must_say_expected=*/false);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--precision", "fp8"},
                        {"--precision", "fp8"}, /*must_say_expected=*/false);
}

TEST(CliBadInput, AttentionKind) {
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--attention", "bogus"},
                        {"--attention", "bogus", "flash, flash1 or eager"});
  expect_one_line_error(
      {"plan", "--model", "tiny-llama", "--hardware", "p4d.24xlarge", "--attention", "bogus", "--quiet"},
      {"--attention", "bogus", "flash, flash1 or eager"});
}

TEST(CliBadInput, ArgumentParsingErrors) {
  expect_one_line_error({"simulate", "--hardware", "p4d.24xlarge"}, {"--model"}, /*must_say_expected=*/false);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--tp", "two"}, {"--tp"},
                        /*must_say_expected=*/false);
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--no-such-flag"},
                        {"--no-such-flag"}, /*must_say_expected=*/false);
}

// ---------------------------------------------------------------------------------------------
// Listings
// ---------------------------------------------------------------------------------------------

// First whitespace-separated word of every line after the header.
std::vector<std::string> first_column(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (header) {
      header = false;
      continue;
    }
    std::istringstream ls(line);
    std::string w;
    if (ls >> w) words.push_back(w);
  }
  return words;
}

TEST(CliListings, ModelsListsAllBuiltins) {
  const RunResult r = run_shardplan({"models"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "") << r;
  const auto names = first_column(r.out);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            std::set<std::string>(kBuiltinModels.begin(), kBuiltinModels.end()))
      << r;
  EXPECT_EQ(names.size(), kBuiltinModels.size()) << r;
}

TEST(CliListings, HardwareListsAllBuiltins) {
  const RunResult r = run_shardplan({"hardware"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "") << r;
  const auto names = first_column(r.out);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            std::set<std::string>(kBuiltinHardware.begin(), kBuiltinHardware.end()))
      << r;
  EXPECT_EQ(names.size(), kBuiltinHardware.size()) << r;
}

TEST(CliListings, ModelsJsonParses) {
  const json j = run_json({"models", "--json"});
  ASSERT_TRUE(j.is_array()) << j.dump(2);
  ASSERT_EQ(j.size(), kBuiltinModels.size());
  std::set<std::string> names;
  for (const auto& m : j) {
    ASSERT_TRUE(m.contains("name") && m["name"].is_string()) << m.dump();
    names.insert(m["name"].get<std::string>());
    for (const char* key : {"num_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                            "ffn_hidden_size", "vocab_size", "parameters"}) {
      ASSERT_TRUE(m.contains(key) && m[key].is_number_integer()) << key << " in " << m.dump();
      EXPECT_GT(m[key].get<long long>(), 0) << key << " in " << m.dump();
    }
    // Listed shapes agree with the model card on disk.
    const json card = builtin_model(m["name"].get<std::string>());
    EXPECT_EQ(m["num_layers"], card["num_layers"]) << m.dump();
    EXPECT_EQ(m["hidden_size"], card["hidden_size"]) << m.dump();
    EXPECT_EQ(m["num_attention_heads"], card["num_attention_heads"]) << m.dump();
  }
  EXPECT_EQ(names, std::set<std::string>(kBuiltinModels.begin(), kBuiltinModels.end()));
}

TEST(CliListings, HardwareJsonParses) {
  const json j = run_json({"hardware", "--json"});
  ASSERT_TRUE(j.is_array()) << j.dump(2);
  ASSERT_EQ(j.size(), kBuiltinHardware.size());
  std::set<std::string> names;
  for (const auto& h : j) {
    ASSERT_TRUE(h.contains("name") && h["name"].is_string()) << h.dump();
    names.insert(h["name"].get<std::string>());
    ASSERT_TRUE(h.contains("devices_per_node") && h["devices_per_node"].is_number_integer()) << h.dump();
    EXPECT_GT(h["devices_per_node"].get<int>(), 0) << h.dump();
    ASSERT_TRUE(h.contains("memory_bytes") && h["memory_bytes"].is_number()) << h.dump();
    EXPECT_GT(h["memory_bytes"].get<double>(), 1e9) << h.dump();
    // Every profile says whether its efficiency terms are fitted, and where they come from.
    const std::string name = h["name"].get<std::string>();
    const std::string status = h["calibration"]["status"].get<std::string>();
    EXPECT_FALSE(h["calibration"]["rule"].get<std::string>().empty()) << h.dump();
    const bool new_2026 = std::find(kUncalibrated2026Hardware.begin(), kUncalibrated2026Hardware.end(), name) !=
                          kUncalibrated2026Hardware.end();
    if (new_2026 || name == "gaudi2-hls2" || name == "trn1.32xlarge") EXPECT_EQ(status, "uncalibrated") << name;
    if (name == "p4d.24xlarge" || name == "p5.48xlarge") EXPECT_EQ(status, "calibrated") << name;
    if (new_2026) EXPECT_GT(h["price_usd_per_hour"].get<double>(), 0) << name;  // a dated price
  }
  EXPECT_EQ(names, std::set<std::string>(kBuiltinHardware.begin(), kBuiltinHardware.end()));
}

}  // namespace cli_test
