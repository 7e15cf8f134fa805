// Expert and context parallelism through the planner: the search tries the ep (and etp) and cp
// degrees it is given, every plan it returns validates and simulates, --forbid/--require ep and
// cp hold, plan.json keeps the degrees, and the exports express them (Megatron-Core flags) or
// note them (ds_config, SMP v1).
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
namespace moe_cp_plan_test {         // named, not anonymous: the files share a unity-build unit
using namespace shardplan::formats;  // Plan, load_plan, save_plan: formats/plan.hpp

namespace sim = shardplan::simulator;
using namespace shardplan::interop;

SearchSpace small_space(int seq) {
  SearchSpace s;
  s.global_batch_sizes = {64};
  s.seq_len = seq;
  s.micro_batch_sizes = {1, 2};
  s.zero_stages = {1, 3};
  s.mics = false;
  s.offload_optimizer = s.offload_activations = {false};
  s.schedules = {sim::PipelineSchedule::one_f_one_b};
  return s;
}

SearchResult search_moe(const Constraints& c = {}) {
  SearchSpace s = small_space(4096);
  s.expert_parallel = {1, 2, 4, 8};
  SearchOptions o;
  o.top_k = 8;
  o.threads = 1;
  s.node_counts = {2};
  return search(sim::load_model("mixtral-8x7b"), sim::load_hardware("p5.48xlarge"), s, c, o);
}

void expect_valid(const Ranked& r) {
  sim::ParallelConfig cfg = r.candidate.config;
  const sim::ModelSpec m = sim::load_model(r.prediction.model_name);
  EXPECT_NO_THROW(sim::validate_config(m, r.candidate.cluster, cfg)) << r.candidate.key;
  EXPECT_GT(r.prediction.tokens_per_s, 0) << r.candidate.key;
}

TEST(MoePlan, SearchTriesExpertParallelismAndEveryPlanValidates) {
  const SearchResult all = search_moe();
  ASSERT_FALSE(all.ranked.empty());
  bool any_ep = false;
  for (const auto& r : all.ranked) {
    expect_valid(r);
    any_ep |= r.candidate.config.ep > 1;
    if (r.candidate.config.tp > 1) { EXPECT_TRUE(r.candidate.config.sequence_parallel) << r.candidate.key; }
  }
  EXPECT_TRUE(any_ep);
  // Without expert parallelism every rank holds all experts.
  Constraints no_ep;
  no_ep.forbid = {"ep"};
  const SearchResult forbidden = search_moe(no_ep);
  for (const auto& r : forbidden.ranked) EXPECT_EQ(r.candidate.config.ep, 1) << r.candidate.key;
  if (!forbidden.ranked.empty()) {
    EXPECT_GE(forbidden.ranked.front().prediction.time.step_s, all.ranked.front().prediction.time.step_s);
  }
}

TEST(ContextParallelPlan, LongSequencesSearchCpAndRequireHolds) {
  SearchSpace s = small_space(65536);
  s.global_batch_sizes = {8};
  s.micro_batch_sizes = {1};
  s.context_parallel = {1, 2, 4, 8};
  SearchOptions o;
  o.top_k = 5;
  o.threads = 1;
  Constraints need_cp;
  need_cp.require = {"cp"};
  const SearchResult r = search(sim::load_model("llama3.1-8b"), sim::load_hardware("p5.48xlarge"), s, need_cp, o);
  ASSERT_FALSE(r.ranked.empty());
  for (const auto& x : r.ranked) {
    EXPECT_GT(x.candidate.config.cp, 1) << x.candidate.key;
    EXPECT_NE(x.candidate.key.find(" cp="), std::string::npos) << x.candidate.key;
    expect_valid(x);
  }
  // With cp off the table the same search holds fewer points.
  s.context_parallel = {1};
  const SearchResult none = search(sim::load_model("llama3.1-8b"), sim::load_hardware("p5.48xlarge"), s, {}, o);
  EXPECT_LT(none.considered, r.considered);
}

Plan moe_cp_plan() {
  sim::ParallelConfig c;
  c.tp = 2;
  c.pp = 8;
  c.cp = 2;
  c.dp = 8;
  c.ep = 32;
  c.etp = 1;
  c.zero_stage = 1;
  c.sequence_parallel = true;
  c.micro_batch_size = 1;
  c.global_batch_size = 256;
  c.seq_len = 8192;
  c.partition = {7, 7, 8, 8, 8, 8, 8, 7};
  c.cp_kind = sim::CpKind::ring;
  return shardplan::testing::plan_of("deepseek-v3", "p5.48xlarge", 32, c);  // 256 GPUs
}

std::string value_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto at = std::find(args.begin(), args.end(), flag);
  return at == args.end() || at + 1 == args.end() ? std::string("<absent>") : *(at + 1);
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(MoeCpPlan, PlanFileKeepsTheDegreesAndExportsExpressThem) {
  shardplan::testing::TempDir dir;
  const Plan p = moe_cp_plan();
  save_plan(p, dir.file("plan.json"));
  const Plan back = load_plan(dir.file("plan.json"));
  EXPECT_EQ(back.config.cp, 2);
  EXPECT_EQ(back.config.ep, 32);
  EXPECT_EQ(back.config.expert_tp(), 1);
  EXPECT_EQ(back.model.moe.num_experts, 256);
  EXPECT_DOUBLE_EQ(back.prediction.time.step_s, p.prediction.time.step_s);
  const std::vector<std::string> args = megatron_args(p);
  EXPECT_EQ(value_after(args, "--context-parallel-size"), "2");
  EXPECT_EQ(value_after(args, "--cp-comm-type"), "p2p");
  EXPECT_EQ(value_after(args, "--expert-model-parallel-size"), "32");
  EXPECT_EQ(value_after(args, "--expert-tensor-parallel-size"), "1");
  EXPECT_EQ(value_after(args, "--num-experts"), "256");
  EXPECT_EQ(value_after(args, "--moe-router-topk"), "8");
  EXPECT_EQ(value_after(args, "--moe-layer-freq"), "([0]*3+[1]*58)");
  EXPECT_EQ(value_after(args, "--kv-lora-rank"), "512");
  EXPECT_EQ(value_after(args, "--qk-head-dim"), "128");
  EXPECT_EQ(value_after(args, "--qk-pos-emb-head-dim"), "64");
  EXPECT_TRUE(mentions(deepspeed_notes(p), "deepspeed.moe.layer.MoE(num_experts=256, ep_size=32"));
  EXPECT_TRUE(mentions(deepspeed_notes(p), "ring attention"));
  EXPECT_TRUE(mentions(smp_notes(p), "context_parallel_degree 2"));
  EXPECT_TRUE(mentions(smp_notes(p), "expert_parallel_degree 32"));
}

}  // namespace moe_cp_plan_test
}  // namespace shardplan::planner
