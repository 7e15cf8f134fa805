// `shardplan simulate --ep/--cp` and `plan --ep/--cp` end to end: bad degrees refused with one
// line naming the flag (ep not dividing the experts, cp not dividing the sequence, ep on a dense
// model), an MoE simulation carrying ep/etp and the expert all-to-all into its JSON, a
// context-parallel one carrying cp and its exchange, and a plan that searches ep.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace moe_cp_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

const std::vector<std::string> kMoe = {"simulate", "--model", "tiny-moe", "--hardware", "p5.48xlarge", "--nodes",
                                       "1",        "--zero",  "1",        "--seq-len",  "1024"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

TEST(MoeCli, BadDegreesAreOneLineNamingTheFlag) {
  expect_one_line_error(with(kMoe, {"--ep", "3"}), {"--ep", "experts"});
  expect_one_line_error({"simulate", "--model", "llama3.1-8b", "--hardware", "p5.48xlarge", "--ep", "2"},
                        {"--ep", "no experts"});
  expect_one_line_error(
      {"simulate", "--model", "llama3.1-8b", "--hardware", "p5.48xlarge", "--cp", "2", "--seq-len", "4098"},
      {"--cp", "--seq-len"});
  expect_one_line_error(
      {"simulate", "--model", "llama3.1-8b", "--hardware", "p5.48xlarge", "--cp", "2", "--cp-kind", "spiral"},
      {"--cp-kind", "ring,all_to_all"}, /*must_say_expected=*/false);
  expect_one_line_error({"plan", "--model", "llama3.1-8b", "--hardware", "p5.48xlarge", "--ep", "2", "--quiet"},
                        {"--ep", "no experts"});
}

TEST(MoeCli, SimulateCarriesExpertAndContextParallelism) {
  const json moe = run_json(with(kMoe, {"--ep", "8", "--json"}));
  EXPECT_EQ(moe["config"]["expert_parallel"], 8);
  EXPECT_EQ(moe["config"]["expert_tensor_parallel"], 1);
  EXPECT_GT(moe["time"]["ep_comm_exposed_seconds"].get<double>(), 0.0);
  EXPECT_LT(moe["active_parameters"].get<double>(), moe["total_parameters"].get<double>());
  const json cp = run_json({"simulate", "--model", "llama3.1-8b", "--hardware", "p5.48xlarge", "--cp", "2", "--cp-kind",
                            "all_to_all", "--seq-len", "16384", "--zero", "1", "--json"});
  EXPECT_EQ(cp["config"]["context_parallel"], 2);
  EXPECT_EQ(cp["config"]["data_parallel"], 4);
  EXPECT_EQ(cp["config"]["context_parallel_kind"], "all_to_all");
  EXPECT_GT(cp["time"]["cp_comm_exposed_seconds"].get<double>(), 0.0);
}

TEST(MoeCli, PlanSearchesExpertParallelism) {
  const json p = run_json({"plan", "--model", "tiny-moe", "--hardware", "p5.48xlarge", "--nodes", "1", "--seq-len",
                           "1024", "--micro-batch-sizes", "1,2", "--zero-stages", "1", "--require", "ep", "--json",
                           "--quiet", "--threads", "1"});
  ASSERT_TRUE(p.contains("ranked")) << p.dump().substr(0, 400);
  ASSERT_FALSE(p["ranked"].empty());
  for (const auto& x : p["ranked"]) EXPECT_GT(x["config"]["expert_parallel"].get<int>(), 1);
}

}  // namespace moe_cp_cli_test
