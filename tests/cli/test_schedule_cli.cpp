// `shardplan simulate` and `plan` with DeepSeek's bidirectional DualPipe: the simulation runs, the
// schedules it cannot run are refused in one line naming the flag (exit 2), and a plan over a
// schedule no framework runs says so instead of claiming nothing fits.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace schedule_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

const std::vector<std::string> kDualPipe = {
    "simulate",         "--model", "llama2-7b",          "--hardware", "p4de.24xlarge", "--schedule", "dualpipe",
    "--virtual-stages", "2",       "--micro-batch-size", "1"};

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

TEST(ScheduleCli, DualPipeSimulatesTwoStagesPerRank) {
  const json j = run_json(with(kDualPipe, {"--pp", "4", "--global-batch-size", "16", "--json"}));
  const json& stages = j["memory"]["stages"];
  ASSERT_EQ(stages.size(), 4u) << j.dump();
  EXPECT_EQ(stages[1]["layers"].get<int>(), 16);                  // stages 1 and 2 of 4: 8 layers each
  EXPECT_EQ(stages[1]["in_flight_micro_batches"].get<int>(), 5);  // pp + 1
  EXPECT_TRUE(stages[3]["has_embedding"].get<bool>() && stages[3]["has_head"].get<bool>());
}

TEST(ScheduleCli, DualPipeRefusalsNameTheFlag) {
  // 3 nodes: pp 3 x dp 8.
  expect_one_line_error(with(kDualPipe, {"--nodes", "3", "--pp", "3", "--global-batch-size", "64"}), {"--pp", "even"});
  expect_one_line_error(with(kDualPipe, {"--pp", "4", "--global-batch-size", "18"}), {"--global-batch-size", "even"});
  expect_one_line_error(with(kDualPipe, {"--pp", "4", "--global-batch-size", "12"}),
                        {"--global-batch-size", "2 x --pp"});
}

TEST(ScheduleCli, APlanOverAScheduleNoFrameworkRunsSaysSo) {
  const RunResult r = run_shardplan({"plan", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--schedules",
                                     "dualpipe", "--global-batch-size", "64", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r;  // as for nothing that fits
  EXPECT_TRUE(contains(r.out, "run by no framework")) << r;
  EXPECT_FALSE(contains(r.out, "no configuration fits the constraints")) << r;
}

}  // namespace schedule_cli_test
