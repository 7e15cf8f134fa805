// `simulate --packed-document-tokens` / `plan --packed-document-tokens` end to end: the setting in
// the JSON config and the report line, a faster step than the same unpacked run, the plan tag,
// and one-line refusals naming the flag (eager attention, past the sequence length).
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace {

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

const std::vector<std::string> kSim = {"simulate", "--model", "llama2-7b", "--hardware", "p5.48xlarge", "--nodes", "1",
                                       "--zero", "1", "--global-batch-size", "8", "--seq-len", "8192"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

TEST(PackedCli, SimulateAndPlanCarryTheDocumentLengthAndRefuseWhatCannotPack) {
  const json whole = run_json(with(kSim, {"--json"}));
  const json docs = run_json(with(kSim, {"--json", "--packed-document-tokens", "256"}));
  EXPECT_EQ(whole["config"]["packed_document_tokens"], 0);
  EXPECT_EQ(docs["config"]["packed_document_tokens"], 256);
  EXPECT_LT(docs["time"]["step_seconds"].get<double>(), whole["time"]["step_seconds"].get<double>());
  const RunResult report = run_shardplan(with(kSim, {"--packed-document-tokens", "256"}));
  EXPECT_EQ(report.exit_code, 0) << report;
  EXPECT_TRUE(contains(report.out, "packed-docs=256")) << report;
  expect_one_line_error(with(kSim, {"--attention", "eager", "--packed-document-tokens", "256"}),
                        {"--packed-document-tokens", "flash or flash1"});
  expect_one_line_error(with(kSim, {"--packed-document-tokens", "8192"}), {"--packed-document-tokens", "8192"});
  const RunResult plan = run_shardplan({"plan", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--nodes", "1",
                                        "--global-batch-size", "64", "--seq-len", "1024", "--packed-document-tokens",
                                        "128", "--top", "1", "--quiet"});
  EXPECT_EQ(plan.exit_code, 0) << plan;
  EXPECT_TRUE(contains(plan.out, "packed-docs-128")) << plan;
  expect_one_line_error({"plan", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--nodes", "1", "--seq-len", "1024",
                         "--attention", "eager", "--packed-document-tokens", "128", "--quiet"},
                        {"--packed-document-tokens", "flash or flash1"});
}

}  // namespace
