// `shardplan runs import LOG --format F`: each format's fixture (tests/data/logs) becomes a run of a
// shardplan.runs/1 file whose figure is the log's, which `validate --runs` then takes; appending,
// refusals and the line-numbered error, through the real binary.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_support.hpp"

namespace runs_import_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

struct Case {
  const char* format;
  const char* log;
  std::vector<std::string> layout;
  const char* key;
  double value;  // the figure on the log's lines (see test_training_log.cpp for which)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"megatron",
       "megatron.log",
       {"--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--tp", "2", "--zero", "1", "--micro-batch-size", "2",
        "--global-batch-size", "64", "--seq-len", "4096"},
       "step_seconds",
       4.4085},
      {"torchtitan",
       "torchtitan.log",
       {"--model", "llama2-7b", "--hardware", "p5.48xlarge", "--zero", "3", "--seq-len", "4096"},
       "tokens_per_second_per_device",
       3350},
      {"deepspeed",
       "deepspeed.log",
       {"--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--zero", "3", "--micro-batch-size", "2",
        "--global-batch-size", "64", "--recompute", "full"},
       "samples_per_second",
       14.0411012},
      {"hf-trainer",
       "hf-trainer.log",
       {"--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--zero", "3", "--micro-batch-size", "4", "--lora-rank",
        "16", "--lora-targets", "q_proj,v_proj"},
       "samples_per_second",
       15.513},
      {"optimum-habana",
       "optimum-habana.log",
       {"--model", "llama2-70b", "--hardware", "gaudi2-hls2", "--zero", "3", "--micro-batch-size", "10", "--recompute",
        "full", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj"},
       "samples_per_second",
       6.811},
      {"shardrun",
       "shardrun-metrics.jsonl",
       {"--model", "tiny-gpt", "--hardware", "local-cpu-2core", "--pp", "2", "--schedule", "gpipe",
        "--micro-batch-size", "2", "--global-batch-size", "8", "--seq-len", "128", "--precision", "fp32", "--attention",
        "eager"},
       "step_seconds",
       0.365521384},
  };
  return c;
}

std::vector<std::string> import_args(const Case& c, const std::string& out, bool append) {
  std::vector<std::string> a = {"runs",     "import",   test_data(std::string("logs/") + c.log),
                                "--format", c.format,   "--out",
                                out,        "--source", "fixtures"};
  if (append) a.push_back("--append");
  a.insert(a.end(), c.layout.begin(), c.layout.end());
  return a;
}

TEST(CliRunsImport, EveryFormatsFixtureBecomesARunWithTheLogsFigure) {
  TempDir tmp;
  const std::string out = tmp.file("mine.json");
  bool first = true;
  for (const Case& c : cases()) {
    const RunResult r = run_shardplan(import_args(c, out, !first));
    ASSERT_EQ(r.exit_code, 0) << c.format << "\n" << r;
    first = false;
    const json file = read_json(out);
    EXPECT_EQ(file["schema"], "shardplan.runs/1");
    const json& run = file["runs"].back();
    EXPECT_EQ(run["source"], "fixtures");
    ASSERT_TRUE(run["measured"].contains(c.key)) << c.format << ": " << run["measured"].dump();
    EXPECT_NEAR(run["measured"][c.key].get<double>(), c.value, 1e-9 * c.value) << c.format;
    EXPECT_TRUE(contains(run["note"].get<std::string>(), c.format)) << run["note"];
  }
  const json file = read_json(out);
  ASSERT_EQ(file["runs"].size(), cases().size());
  // The Megatron log's peak ("max allocated", MB) is kept in GiB.
  EXPECT_NEAR(file["runs"][0]["measured"]["peak_memory_GiB"].get<double>(), 55122.40 / 1024.0, 1e-9);
  // The file is what validate --runs takes: one row per run.
  const std::string results = tmp.file("results.json");
  const RunResult v = run_shardplan({"validate", "--runs", out, "--json", results});
  ASSERT_EQ(v.exit_code, 0) << v;
  EXPECT_EQ(read_json(results)["runs"].size(), cases().size());
}

TEST(CliRunsImport, AnExistingFileNeedsAppendAndNamesStayUnique) {
  TempDir tmp;
  const std::string out = tmp.file("mine.json");
  const Case& c = cases().front();
  ASSERT_EQ(run_shardplan(import_args(c, out, false)).exit_code, 0);
  const std::string before = read_json(out).dump();
  const RunResult again = run_shardplan(import_args(c, out, false));
  EXPECT_EQ(again.exit_code, 2) << again;
  EXPECT_TRUE(contains(again.err, "--append")) << again;
  const RunResult twice = run_shardplan(import_args(c, out, true));  // same name again
  EXPECT_EQ(twice.exit_code, 2) << twice;
  EXPECT_TRUE(contains(twice.err, "unique")) << twice;
  EXPECT_EQ(read_json(out).dump(), before);  // untouched by either refusal
  std::vector<std::string> renamed = import_args(c, out, true);
  renamed.insert(renamed.end(), {"--name", "megatron-again"});
  ASSERT_EQ(run_shardplan(renamed).exit_code, 0);
  EXPECT_EQ(read_json(out)["runs"].size(), 2u);
}

TEST(CliRunsImport, AMalformedLogLineIsNamedAndNothingIsWritten) {
  TempDir tmp;
  const std::string log = tmp.file("bad.log"), out = tmp.file("mine.json");
  std::ofstream(log) << "booting\n"
                     << " [2026] iteration        1/ 9 | elapsed time per iteration (ms): 812.5 |\n"
                     << " [2026] iteration        2/ 9 | elapsed time per iteration (ms): |\n";
  std::vector<std::string> args = import_args(cases().front(), out, false);
  args[2] = log;
  const RunResult r = run_shardplan(args);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(contains(r.err, log + ":3:")) << r;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliRunsImport, ALayoutThatDoesNotFitTheClusterIsRefusedBeforeWriting) {
  TempDir tmp;
  const std::string out = tmp.file("mine.json");
  std::vector<std::string> args = import_args(cases().front(), out, false);
  args.insert(args.end(), {"--pp", "3"});  // tp 2 x pp 3 does not divide 8 devices
  const RunResult r = run_shardplan(args);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(contains(r.err, "--tp/--pp")) << r;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace runs_import_cli_test
