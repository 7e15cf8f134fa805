// Each framework's knob table against its export: configurations drawn from what the table allows
// (frameworks/), with the framework's defaults, validated by the simulator, export without a
// refusal and import back to the same layout and settings. A seeded draw, so a failure repeats.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "interop/accelerate.hpp"
#include "interop/config_import.hpp"
#include "interop/launch_export.hpp"
#include "interop/torchtitan.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::interop {
namespace framework_exports_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;
namespace fw = shardplan::frameworks;

template <class T>
T pick(std::mt19937& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

// One configuration of llama3.1-8b on 2 x p5 inside `table`.
sim::ParallelConfig draw(const fw::KnobTable& k, std::mt19937& rng) {
  sim::ParallelConfig c;
  c.tp = k.tensor_parallel ? pick(rng, std::vector<int>{1, 2, 4}) : 1;
  c.pp = k.schedules.empty() ? 1 : pick(rng, std::vector<int>{1, 2});
  c.cp = k.cp_kinds.empty() ? 1 : pick(rng, std::vector<int>{1, 2});
  if (c.cp > 1) c.cp_kind = pick(rng, k.cp_kinds);
  c.dp = 16 / (c.tp * c.pp * c.cp);
  if (c.pp > 1) {
    c.schedule = pick(rng, k.schedules);
    if (c.schedule == sim::PipelineSchedule::interleaved) c.virtual_stages = 2;
  }
  std::vector<int> zero;
  const bool model_parallel = c.tp > 1 || c.pp > 1 || c.cp > 1;
  for (int z : k.zero_stages)
    if ((c.pp == 1 || z <= k.pipeline_zero_max) && !(z == 0 && k.zero0_only_alone && model_parallel)) zero.push_back(z);
  c.zero_stage = pick(rng, zero);
  c.sequence_parallel = c.tp > 1 && (k.sequence_parallel_required || (k.sequence_parallel && rng() % 2));
  c.recompute = pick(rng, k.recompute);
  if (c.recompute == sim::Recompute::full && k.recompute_every && rng() % 2) c.recompute_every = 2;
  c.attention = pick(rng, k.attention);
  c.fusion = pick(rng, k.fusion);
  c.fp8 = pick(rng, k.fp8);
  c.micro_batch_size = 1;
  c.global_batch_size = 64;
  c.seq_len = 4096;
  return c;
}

// The settings every one of these imports carries.
void expect_same(const sim::ParallelConfig& want, const sim::ParallelConfig& got, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.cp, want.cp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.recompute, want.recompute);
  EXPECT_EQ(got.recompute_every, want.recompute_every);
  EXPECT_EQ(got.sequence_parallel, want.sequence_parallel);
  EXPECT_EQ(got.fp8, want.fp8);
  EXPECT_EQ(got.fusion, want.fusion);
  if (want.pp > 1) {
    EXPECT_EQ(got.schedule, want.schedule);
    EXPECT_EQ(got.virtual_stages, want.virtual_stages);
  }
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
}

using RoundTrip = std::function<ImportResult(const formats::Plan&, const ImportContext&)>;

void check_framework(const std::string& spec, const RoundTrip& round_trip, int draws = 40) {
  const fw::FrameworkModel model = fw::parse_framework_spec(spec, "test");
  std::mt19937 rng(20261129);
  int valid = 0;
  for (int i = 0; i < draws; ++i) {
    formats::Plan p;
    p.model = sim::load_model("llama3.1-8b");
    p.cluster = sim::ClusterSpec{sim::load_hardware("p5.48xlarge"), 2, 0};
    sim::ParallelConfig cfg = draw(model.runs, rng);
    // What the draw decided; the framework's defaults fill the rest.
    const std::set<std::string> given = {"tensor_parallel",
                                         "pipeline_parallel",
                                         "context_parallel",
                                         "context_parallel_kind",
                                         "data_parallel",
                                         "pipeline_schedule",
                                         "virtual_stages",
                                         "zero_stage",
                                         "sequence_parallel",
                                         "recompute",
                                         "recompute_every",
                                         "attention",
                                         "fusion",
                                         "fp8",
                                         "micro_batch_size",
                                         "global_batch_size",
                                         "seq_len"};
    fw::apply_defaults(model, cfg, given);
    fw::bind(model, cfg);
    try {
      sim::validate_config(p.model, p.cluster, cfg);
    } catch (const sim::InputError&) {
      continue;  // a combination the simulator refuses for this model (divisibility, SP rules)
    }
    ++valid;
    const std::string what = spec + " draw " + std::to_string(i) + ": " + sim::to_json(cfg).dump();
    ASSERT_EQ(fw::why_not(model, cfg, p.cluster), std::nullopt) << what;
    p.config = cfg;
    p.framework = model;
    p.prediction = sim::simulate(p.model, p.cluster, cfg);
    ImportContext ctx;
    ctx.devices = p.cluster.devices();
    ctx.devices_per_node = p.cluster.per_node();
    ctx.seq_len = cfg.seq_len;
    ctx.micro_batch_size = cfg.micro_batch_size;
    ctx.global_batch_size = cfg.global_batch_size;
    try {
      expect_same(cfg, round_trip(p, ctx).config, what);
    } catch (const sim::InputError& e) { ADD_FAILURE() << what << "\n  export or import refused: " << e.what(); }
  }
  EXPECT_GE(valid, draws / 3) << spec << ": too few drawn configurations are valid to say anything";
}

TEST(FrameworkExports, MegatronCoreRunsEveryCombinationItsTableAllows) {
  check_framework("megatron", [](const formats::Plan& p, const ImportContext& ctx) {
    return import_megatron(megatron_command_line(p), ctx, "megatron_args.sh");
  });
}

TEST(FrameworkExports, TorchtitanRunsEveryCombinationItsTableAllows) {
  check_framework("torchtitan", [](const formats::Plan& p, const ImportContext& ctx) {
    return import_torchtitan(torchtitan_toml(p), ctx, "job.toml");
  });
}

TEST(FrameworkExports, DeepSpeedRunsEveryCombinationItsTableAllows) {
  check_framework("deepspeed", [](const formats::Plan& p, const ImportContext& ctx) {
    return import_deepspeed(deepspeed_config(p), ctx, "ds_config.json");
  });
}

TEST(FrameworkExports, AccelerateFsdpRunsEveryCombinationItsTableAllows) {
  check_framework("accelerate-fsdp", [](const formats::Plan& p, const ImportContext& ctx) {
    return import_accelerate(accelerate_yaml(p), ctx, "accelerate.yaml");
  });
}

}  // namespace framework_exports_test
}  // namespace shardplan::interop
