// FP8 through the planner: the search tries the recipes it is given only where the device has
// FP8 tensor cores (and FP8 wins a compute-bound plan there), --forbid fp8 removes them,
// plan.json keeps the recipe, and the exports express it (Megatron --fp8-format/--fp8-recipe) or
// note it (ds_config, SMP v1).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "formats/plan.hpp"
#include "interop/launch_export.hpp"
#include "planner/search.hpp"
#include "simulator/evaluator.hpp"
#include "support/plan_of.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::planner {
namespace fp8_plan_test {            // named, not anonymous: the files share a unity-build unit
using namespace shardplan::formats;  // Plan, load_plan, save_plan: formats/plan.hpp

namespace sim = shardplan::simulator;
using namespace shardplan::interop;

SearchResult search_on(const char* hw, const Constraints& c = {}) {
  const sim::ModelSpec m = sim::load_model("llama2-13b");
  SearchSpace s;
  s.global_batch_sizes = {32};
  s.seq_len = 4096;
  s.micro_batch_sizes = {1, 2};
  s.zero_stages = {1, 3};
  s.offload_optimizer = s.offload_activations = {false};
  s.fp8_recipes = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
  SearchOptions o;
  o.top_k = 5;
  o.threads = 1;
  return search(m, sim::load_hardware(hw), s, c, o);
}

TEST(Fp8Plan, SearchTriesFp8OnlyWhereTheDeviceHasIt) {
  const SearchResult h100 = search_on("p5.48xlarge");
  ASSERT_FALSE(h100.ranked.empty());
  const auto& best = h100.ranked.front().candidate;
  EXPECT_EQ(best.config.fp8, sim::Fp8Recipe::delayed) << best.key;  // compute-bound: FP8 is faster
  EXPECT_NE(best.key.find("fp8=delayed"), std::string::npos) << best.key;
  const SearchResult a100 = search_on("p4de.24xlarge");
  ASSERT_FALSE(a100.ranked.empty());
  for (const auto& r : a100.ranked) EXPECT_EQ(r.candidate.config.fp8, sim::Fp8Recipe::none) << r.candidate.key;
  // The A100 search skipped the FP8 half of its space: fewer points than on the H100.
  EXPECT_LT(a100.considered, h100.considered);
  Constraints no_fp8;
  no_fp8.forbid = {"fp8"};
  const SearchResult forbidden = search_on("p5.48xlarge", no_fp8);
  ASSERT_FALSE(forbidden.ranked.empty());
  for (const auto& r : forbidden.ranked) EXPECT_EQ(r.candidate.config.fp8, sim::Fp8Recipe::none);
  EXPECT_GT(forbidden.ranked.front().prediction.time.step_s, h100.ranked.front().prediction.time.step_s);
}

Plan fp8_plan(bool param_gather) {
  sim::ParallelConfig c;
  c.tp = 2;
  c.dp = 4;
  c.zero_stage = 1;
  c.micro_batch_size = 1;
  c.global_batch_size = 8;
  c.seq_len = 4096;
  c.fp8 = sim::Fp8Recipe::delayed;
  c.fp8_param_gather = param_gather;
  return shardplan::testing::plan_of("llama2-7b", "p5.48xlarge", 1, c);
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(Fp8Plan, PlanFileKeepsTheRecipe) {
  shardplan::testing::TempDir dir;
  const Plan p = fp8_plan(true);
  save_plan(p, dir.file("plan.json"));
  const Plan back = load_plan(dir.file("plan.json"));
  EXPECT_EQ(back.config.fp8, sim::Fp8Recipe::delayed);
  EXPECT_TRUE(back.config.fp8_param_gather);
  EXPECT_DOUBLE_EQ(back.prediction.time.step_s, p.prediction.time.step_s);
}

TEST(Fp8Plan, ExportsExpressOrNoteIt) {
  const std::vector<std::string> args = megatron_args(fp8_plan(true));
  const auto at = std::find(args.begin(), args.end(), "--fp8-recipe");
  ASSERT_NE(at, args.end());
  EXPECT_EQ(*(at + 1), "delayed");
  EXPECT_TRUE(has(args, "--fp8-format"));
  EXPECT_TRUE(has(args, "hybrid"));
  EXPECT_TRUE(has(args, "--fp8-param-gather"));
  EXPECT_FALSE(has(megatron_args(fp8_plan(false)), "--fp8-param-gather"));
  EXPECT_TRUE(mentions(deepspeed_notes(fp8_plan(false)), "Transformer Engine"));
  EXPECT_TRUE(mentions(smp_notes(fp8_plan(false)), "FP8 is not available in SMP v1"));
}

}  // namespace fp8_plan_test
}  // namespace shardplan::planner
