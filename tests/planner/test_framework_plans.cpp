// plan --framework: the search narrowed to a framework's knob table gives only plans it runs
// (frameworks::why_not) and its export writes every ranked row; a fixed field it cannot run is one
// line naming the flag, and its defaults fill the fields the user left.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>

#include "formats/plan.hpp"
#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "interop/accelerate.hpp"
#include "interop/habana.hpp"
#include "interop/launch_export.hpp"
#include "interop/neuron.hpp"
#include "interop/smp_v2.hpp"
#include "interop/torchtitan.hpp"
#include "planner/framework_space.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "support/framework_cluster.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::planner {
namespace framework_plans_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;
namespace fw = shardplan::frameworks;
using namespace shardplan::interop;
using Files = std::vector<std::pair<std::string, std::string>>;
using Export = std::function<Files(const formats::Plan&)>;

using testing::cluster_for;

// plan --framework: every ranked row is one the framework runs, and its export writes it.
void check_plans(const std::string& spec, const Export& make) {
  const fw::FrameworkModel model = fw::parse_framework_spec(spec, "test");
  const sim::ClusterSpec cluster = cluster_for(model.runs);
  for (const char* name : {"llama3.1-8b", "llama2-13b"}) {
    SearchSpace s;
    s.node_counts = {cluster.nodes};
    s.global_batch_sizes = {64};
    s.seq_len = 4096;
    Constraints c;
    narrow_to_framework(model, s, c, {});
    SearchOptions o;
    o.top_k = 8;
    o.threads = 1;
    const sim::ModelSpec m = sim::load_model(name);
    const SearchResult r = search(m, cluster.hardware, s, c, o);
    EXPECT_FALSE(r.ranked.empty()) << spec << " " << name;
    for (const auto& x : r.ranked) {
      const std::string what = spec + " " + name + ": " + x.candidate.key;
      EXPECT_EQ(fw::why_not(model, x.candidate.config, x.candidate.cluster), std::nullopt) << what;
      EXPECT_EQ(x.frameworks, std::vector<std::string>{model.name}) << what;
      formats::Plan p;
      p.model = m;
      p.cluster = x.candidate.cluster;
      p.config = x.candidate.config;
      p.prediction = x.prediction;
      p.framework = model;
      try {
        (void)make(p);
      } catch (const sim::InputError& e) { ADD_FAILURE() << what << "\n  export refused: " << e.what(); }
    }
  }
}

TEST(FrameworkPlans, EveryRankedRowIsOneTheFrameworkRunsAndExports) {
  check_plans("megatron", [](const formats::Plan& p) { return Files{{"a.sh", megatron_command_line(p)}}; });
  check_plans("torchtitan", [](const formats::Plan& p) { return Files{{"a.toml", torchtitan_toml(p)}}; });
  check_plans("deepspeed", [](const formats::Plan& p) { return Files{{"a.json", deepspeed_config(p).dump()}}; });
  check_plans("accelerate-fsdp", [](const formats::Plan& p) { return Files{{"a.yaml", accelerate_yaml(p)}}; });
  check_plans("smp-v2", [](const formats::Plan& p) { return Files{{"a.json", smp_v2_config(p).dump()}}; });
  check_plans("neuronx-distributed", [](const formats::Plan& p) { return Files{{"a.sh", neuron_command_line(p)}}; });
  check_plans("optimum-habana", [](const formats::Plan& p) {
    return Files{{"a.sh", habana_command_line(p, "ds.json")}, {"ds.json", habana_deepspeed_config(p).dump()}};
  });
}

// SMP v2's example script steps after every batch: the micro-batch is the global batch over dp,
// whatever the micro-batch list, so a global batch of 256 on 16 GPUs still finds plans.
TEST(FrameworkPlans, WithoutGradientAccumulationTheMicroBatchIsTheGlobalBatchOverDp) {
  const fw::FrameworkModel smp = fw::parse_framework_spec("smp-v2", "test");
  ASSERT_FALSE(smp.runs.gradient_accumulation);
  SearchSpace s;
  s.node_counts = {2};
  s.global_batch_sizes = {256};
  s.seq_len = 4096;
  Constraints c;
  narrow_to_framework(smp, s, c, {});
  SearchOptions o;
  o.threads = 1;
  const SearchResult r = search(sim::load_model("llama3.1-8b"), sim::load_hardware("p5.48xlarge"), s, c, o);
  ASSERT_FALSE(r.ranked.empty());
  for (const auto& x : r.ranked) {
    EXPECT_EQ(x.candidate.config.micro_batches(), 1) << x.candidate.key;
    EXPECT_EQ(fw::why_not(smp, x.candidate.config, x.candidate.cluster), std::nullopt) << x.candidate.key;
  }
}

// A plan for one framework exports that framework's files beside the launch scripts, no other's.
TEST(FrameworkPlans, ExportWritesOnlyThePlansFramework) {
  const sim::ModelSpec m = sim::load_model("llama3.1-8b");
  const sim::ClusterSpec cluster{sim::load_hardware("p5.48xlarge"), 1, 0};
  sim::ParallelConfig cfg;
  cfg.tp = 2;
  cfg.dp = 4;
  cfg.zero_stage = 1;
  cfg.micro_batch_size = 1;
  cfg.global_batch_size = 32;
  cfg.seq_len = 4096;
  cfg.sequence_parallel = true;
  formats::Plan p;
  p.model = m;
  p.cluster = cluster;
  p.config = cfg;
  p.prediction = sim::simulate(m, cluster, p.config);
  const auto names_for = [&](const char* framework) {
    p.framework = fw::parse_framework_spec(framework, "test");
    const testing::TempDir dir;
    std::set<std::string> names;
    for (const auto& path : export_all(p, dir.path().string(), "plan.json"))
      names.insert(std::filesystem::path(path).filename().string());
    return names;
  };
  const std::set<std::string> launch{"launch_mpirun.sh", "launch_slurm.sbatch", "NOTES.txt"};
  auto with = [&](std::initializer_list<const char*> extra) {
    std::set<std::string> s = launch;
    s.insert(extra.begin(), extra.end());
    return s;
  };
  EXPECT_EQ(names_for("megatron"), with({"megatron_args.sh"}));
  EXPECT_EQ(names_for("torchtitan"), with({"torchtitan.toml", "torchtitan_launch.sh"}));
  EXPECT_EQ(names_for("deepspeed"), with({"ds_config.json"}));
  EXPECT_EQ(names_for("shardrun"), launch);
  EXPECT_GT(names_for("fms-fsdp").size(), launch.size() + 2);  // no export of its own: every one
}

// Zero-bubble schedules join a framework's search where it runs them (torchtitan: ZBVZeroBubble)
// and its plan ranks them; exports: torchtitan writes ZBV; ZB1P / ZB2P no export carries (each
// refuses naming the schedule).
TEST(FrameworkPlans, ZeroBubbleSchedulesAreSearchedAndExportedWhereRun) {
  const fw::FrameworkModel titan = fw::parse_framework_spec("torchtitan", "test");
  ASSERT_NE(std::find(titan.runs.schedules.begin(), titan.runs.schedules.end(), sim::PipelineSchedule::zbv),
            titan.runs.schedules.end());
  SearchSpace t;
  Constraints c;
  narrow_to_framework(titan, t, c, {});
  EXPECT_NE(std::find(t.schedules.begin(), t.schedules.end(), sim::PipelineSchedule::zbv), t.schedules.end());
  for (auto sched : t.schedules)  // torchtitan runs no ZB1P / ZB2P of one stage per rank
    EXPECT_TRUE(!sim::splits_backward(sched) || sim::v_shaped(sched)) << sim::to_string(sched);
  // Llama 2 7B on 8 A100s with a pipeline: ZBV's filled bubble wins over 1F1B.
  t.node_counts = {1};
  t.global_batch_sizes = {64};
  t.micro_batch_sizes = {2};
  c.max_tp = 1;
  c.require = {"pp"};
  c.framework = titan;
  SearchOptions o;
  o.top_k = 40;
  const SearchResult r = search(sim::load_model("llama2-7b"), sim::load_hardware("p4de.24xlarge"), t, c, o);
  const Ranked* zbv = nullptr;
  const Ranked* ofob = nullptr;
  for (const auto& row : r.ranked) {
    const auto& k = row.candidate.config;
    if (!zbv && k.schedule == sim::PipelineSchedule::zbv) zbv = &row;
    if (!ofob && k.schedule == sim::PipelineSchedule::one_f_one_b) ofob = &row;
  }
  ASSERT_NE(zbv, nullptr);
  ASSERT_NE(ofob, nullptr);
  EXPECT_LT(zbv->prediction.time.step_s, ofob->prediction.time.step_s);
  EXPECT_LT(zbv - &r.ranked.front(), ofob - &r.ranked.front());

  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::ClusterSpec cluster{sim::load_hardware("p4de.24xlarge"), 1, 0};
  formats::Plan p;
  p.model = m;
  p.cluster = cluster;
  p.config.pp = 4;
  p.config.dp = 2;
  p.config.zero_stage = 1;
  p.config.micro_batch_size = 1;
  p.config.global_batch_size = 16;
  p.config.seq_len = 4096;
  p.config.schedule = sim::PipelineSchedule::zb1p;
  p.prediction = sim::simulate(m, cluster, p.config);
  const testing::TempDir dir;
  std::vector<std::string> skipped;
  const auto written = export_all(p, dir.path().string(), "plan.json", {}, &skipped);
  EXPECT_EQ(written.size(), 3u);  // the shardrun launch scripts and NOTES.txt
  EXPECT_FALSE(skipped.empty());
  for (const auto& why : skipped) EXPECT_NE(why.find("zb1p"), std::string::npos) << why;
  // ZBV: torchtitan's files are written, naming ZBVZeroBubble.
  p.config.schedule = sim::PipelineSchedule::zbv;
  p.config.virtual_stages = 2;
  p.prediction = sim::simulate(m, cluster, p.config);
  const testing::TempDir zdir;
  bool toml = false;
  for (const auto& path : export_all(p, zdir.path().string(), "plan.json"))
    if (path.ends_with("torchtitan.toml")) toml = true;
  EXPECT_TRUE(toml);
  EXPECT_NE(torchtitan_toml(p).find("ZBVZeroBubble"), std::string::npos);
}

// With no framework given, points no framework runs (zb1p with FP8: Megatron runs FP8 but no
// ZB1P, shardrun ZB1P but no FP8) are kept out of the ranked list and the front, so they cannot
// crowd out the runnable ones: a wider space never gives a worse plan, and the front shows only
// configurations some framework runs.
TEST(FrameworkPlans, PointsNoFrameworkRunsDoNotCrowdOutThePlan) {
  const sim::ModelSpec m = sim::load_model("llama3.1-405b");
  const sim::HardwareProfile hw = sim::load_hardware("p5.48xlarge");
  SearchSpace s;
  s.node_counts = {256};
  s.seq_len = 8192;
  s.global_batch_sizes = {2048};
  s.context_parallel = {1, 2, 4, 8};
  s.fp8_recipes = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
  SearchOptions o;
  o.top_k = 5;
  const SearchResult narrow = search(m, hw, s, Constraints{}, o);
  s.schedules = {sim::PipelineSchedule::one_f_one_b, sim::PipelineSchedule::interleaved, sim::PipelineSchedule::zb1p,
                 sim::PipelineSchedule::zb2p, sim::PipelineSchedule::zbv};
  const SearchResult wide = search(m, hw, s, Constraints{}, o);
  ASSERT_EQ(narrow.ranked.size(), 5u);
  ASSERT_EQ(wide.ranked.size(), 5u);
  EXPECT_LE(wide.ranked.front().score, narrow.ranked.front().score);
  for (const auto& c : wide.pareto) EXPECT_FALSE(frameworks_running(c.config, c.cluster).empty()) << c.key;
}

TEST(FrameworkPlans, AFixedFieldTheFrameworkCannotRunIsOneLineNamingTheFlag) {
  SearchSpace s;
  s.fusion = sim::Fusion::megatron;
  Constraints c;
  try {
    narrow_to_framework(fw::parse_framework_spec("torchtitan", "test"), s, c, {"fusion"});
    FAIL() << "expected an InputError";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--fusion megatron"), std::string::npos) << e.what();
  }
  SearchSpace d;
  narrow_to_framework(fw::parse_framework_spec("megatron@core", "test"), d, c, {});
  EXPECT_EQ(d.fusion, sim::Fusion::megatron);  // its default where the user named none
}

}  // namespace framework_plans_test
}  // namespace shardplan::planner
