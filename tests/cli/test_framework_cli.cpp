// `--framework` on the command line: a framework's defaults for what the flags leave open, its
// name and memory figure in the prediction, an imported file's framework by default, and one line
// with exit 2 for an unknown name or version.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_support.hpp"

namespace framework_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

const std::vector<std::string> kGpt = {
    "simulate", "--model",   "gpt3-175b", "--hardware", "p4de.24xlarge",      "--nodes", "8",
    "--tp",     "8",         "--pp",      "8",          "--micro-batch-size", "1",       "--global-batch-size",
    "64",       "--seq-len", "2048",      "--json"};

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

TEST(CliFramework, TheFrameworksDefaultsFillWhatTheFlagsLeaveOpen) {
  const json plain = run_json(kGpt);
  const json m2022 = run_json(with(kGpt, {"--framework", "megatron@2022"}));
  EXPECT_EQ(plain["config"]["attention"], "flash");
  EXPECT_EQ(m2022["config"]["attention"], "eager");
  EXPECT_EQ(m2022["config"]["fusion"], "megatron");
  EXPECT_EQ(m2022["framework"], "megatron@2022");
  EXPECT_EQ(m2022["peak_memory_reported"]["kind"], "allocated");
  // A flag the user gave wins over the default.
  const json given = run_json(with(kGpt, {"--framework", "megatron@2022", "--attention", "flash"}));
  EXPECT_EQ(given["config"]["attention"], "flash");
  // Eager attention stores the s x s scores: the 2022 framework's prediction needs more memory.
  EXPECT_GT(m2022["memory"]["per_device_bytes"]["activations"].get<double>(),
            plain["memory"]["per_device_bytes"]["activations"].get<double>());
}

TEST(CliFramework, UnknownNamesAndVersionsAreOneLineExitTwo) {
  expect_one_line_error(with(kGpt, {"--framework", "megatorn"}), {"--framework", "megatorn", "torchtitan"});
  expect_one_line_error(with(kGpt, {"--framework", "torchtitan@v9"}), {"--framework", "v9", "v0.2.2"});
}

// A LoRA rank without --lora-targets takes PEFT's default targets for the family, and says so; a
// family PEFT has no default for still asks for them.
TEST(CliLoraDefaults, PeftsDefaultTargetsWhereNoneAreGiven) {
  const RunResult r = run_shardplan(
      {"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--dp", "8", "--lora-rank", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(contains(r.err, "--lora-targets q_proj,v_proj")) << r.err;
  EXPECT_TRUE(contains(r.err, "peft/utils/constants.py")) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config"]["lora"]["targets"], json::array({"q_proj", "v_proj"})) << j["config"].dump();
  const RunResult g = run_shardplan({"simulate", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--lora-rank", "4"});
  ASSERT_EQ(g.exit_code, 0) << g;
  EXPECT_TRUE(contains(g.err, "--lora-targets c_attn")) << g.err;
  expect_one_line_error(
      {"simulate", "--model", "deepseek-v3", "--hardware", "p5.48xlarge", "--nodes", "32", "--lora-rank", "8"},
      {"--lora-targets"});
}

// A cost ranking needs a price: a profile without one is one line naming the objective, not ranked free.
TEST(CliPlanCost, AProfileWithoutAPriceIsNotRankedFree) {
  const TempDir dir;
  const std::string unpriced = dir.file("gaudi2-unpriced.json");
  std::ofstream(unpriced) << R"({"schema": "shardplan.hardware/1", "name": "gaudi2-unpriced", "base": "gaudi2-hls2",
                                 "price": {"usd_per_hour": 0, "as_of": "unknown", "note": "no price"}})";
  expect_one_line_error({"plan", "--model", "llama2-7b", "--hardware", unpriced, "--objective", "cost"},
                        {"--objective cost", "gaudi2-unpriced", "no public price"});
}

}  // namespace framework_cli_test
