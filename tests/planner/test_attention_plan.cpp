// Attention kinds through the planner: plan.json keeps the kind (and an old plan without it
// reads as flash), the search fixes the kind it is given, and the exports express it (Megatron
// --attention-backend) or note it (ds_config, SMP, the shardrun scripts).
#include <gtest/gtest.h>
#include <algorithm>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "formats/plan.hpp"
#include "interop/launch_export.hpp"
#include "planner/search.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"
#include "support/plan_of.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::planner {
namespace attention_plan_test {      // named, not anonymous: the files share a unity-build unit
using namespace shardplan::formats;  // Plan, load_plan, save_plan: formats/plan.hpp

namespace sim = shardplan::simulator;
using namespace shardplan::interop;

Plan plan_with(sim::AttentionKind kind) {
  sim::ParallelConfig c;
  c.tp = 2;
  c.dp = 4;
  c.zero_stage = 1;
  c.micro_batch_size = 1;
  c.global_batch_size = 8;
  c.seq_len = 4096;
  c.attention = kind;
  return shardplan::testing::plan_of("llama2-7b", "p4de.24xlarge", 1, c);
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool any_mentions(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(AttentionPlan, PlanFileKeepsTheKind) {
  shardplan::testing::TempDir dir;
  for (auto kind : {sim::AttentionKind::flash, sim::AttentionKind::eager}) {
    const Plan p = plan_with(kind);
    const std::string path = dir.file(std::string("plan_") + sim::to_string(kind) + ".json");
    save_plan(p, path);
    EXPECT_EQ(sim::read_json_file(path)["config"]["attention"], sim::to_string(kind));
    const Plan back = load_plan(path);
    EXPECT_EQ(back.config.attention, kind);
    EXPECT_DOUBLE_EQ(back.prediction.time.step_s, p.prediction.time.step_s);
    EXPECT_DOUBLE_EQ(back.prediction.worst.activations, p.prediction.worst.activations);
  }
  // A plan written before attention kinds: no key, read as the default (flash), still loads.
  nlohmann::json old = to_json(plan_with(sim::AttentionKind::eager));
  old["config"].erase("attention");
  const Plan read = plan_from_json(old, "old-plan.json");
  EXPECT_EQ(read.config.attention, sim::AttentionKind::flash);
  EXPECT_LT(read.prediction.worst.activations, plan_with(sim::AttentionKind::eager).prediction.worst.activations);
}

TEST(AttentionPlan, SearchUsesTheKindItIsGiven) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace s;
  s.global_batch_sizes = {16};
  s.seq_len = 4096;
  s.micro_batch_sizes = {1, 2};
  SearchOptions o;
  o.top_k = 3;
  o.threads = 1;
  EXPECT_EQ(s.attention, sim::AttentionKind::flash);  // the default: what current frameworks run
  const SearchResult flash = search(m, hw, s, Constraints{}, o);
  s.attention = sim::AttentionKind::eager;
  const SearchResult eager = search(m, hw, s, Constraints{}, o);
  ASSERT_FALSE(flash.ranked.empty());
  ASSERT_FALSE(eager.ranked.empty());
  for (const auto& r : flash.ranked) EXPECT_EQ(r.candidate.config.attention, sim::AttentionKind::flash);
  for (const auto& r : eager.ranked) {
    EXPECT_EQ(r.candidate.config.attention, sim::AttentionKind::eager);
    EXPECT_NE(r.candidate.key.find("eager-attention"), std::string::npos) << r.candidate.key;
  }
  for (const auto& c : eager.pareto) EXPECT_EQ(c.config.attention, sim::AttentionKind::eager);
  EXPECT_LE(flash.ranked.front().prediction.time.step_s, eager.ranked.front().prediction.time.step_s);
}

TEST(AttentionPlan, ExportsExpressOrNoteTheKind) {
  const Plan flash = plan_with(sim::AttentionKind::flash);
  const Plan eager = plan_with(sim::AttentionKind::eager);
  // Megatron-Core's switch (--use-flash-attn still parses but nothing reads it).
  const auto backend = [](const std::vector<std::string>& a) {
    const auto it = std::find(a.begin(), a.end(), "--attention-backend");
    return it != a.end() && it + 1 != a.end() ? *(it + 1) : std::string("<absent>");
  };
  EXPECT_EQ(backend(megatron_args(flash)), "flash");
  EXPECT_EQ(backend(megatron_args(eager)), "unfused");
  EXPECT_FALSE(has(megatron_args(flash), "--use-flash-attn"));
  EXPECT_FALSE(any_mentions(megatron_notes(flash), "attention"));
  EXPECT_TRUE(any_mentions(megatron_notes(eager), "eager attention"));
  EXPECT_NE(megatron_command_line(eager).find("# shardplan note: eager attention"), std::string::npos);
  // ds_config and SMP parameters have no attention setting: a note says where it goes.
  EXPECT_TRUE(any_mentions(deepspeed_notes(flash), "flash_attention_2"));
  EXPECT_TRUE(any_mentions(deepspeed_notes(eager), "attn_implementation=\"eager\""));
  EXPECT_NE(deepspeed_config(eager)["shardplan_note"].get<std::string>().find("eager"), std::string::npos);
  EXPECT_TRUE(any_mentions(smp_notes(flash), "attention kind flash"));
  EXPECT_TRUE(any_mentions(smp_notes(eager), "attention kind eager"));
  EXPECT_NE(slurm_script(eager, "plan.json").find("# attention: eager"), std::string::npos);
  EXPECT_NE(slurm_script(flash, "plan.json").find("# attention: flash"), std::string::npos);
  shardplan::testing::TempDir dir;
  (void)export_all(eager, dir.file("launch"), "plan.json");
  std::ifstream in(dir.file("launch/launch_mpirun.sh"));
  std::stringstream mpirun;
  mpirun << in.rdbuf();
  EXPECT_NE(mpirun.str().find("# attention: eager"), std::string::npos) << mpirun.str();
}

}  // namespace attention_plan_test
}  // namespace shardplan::planner
