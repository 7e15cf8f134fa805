// Each framework's knob table against its export: configurations drawn from what the table allows
// (frameworks/), with the framework's defaults, validated by the simulator, export without a
// refusal, are written as files and import back (`--import`'s path) as the same framework with
// the same layout and settings. A seeded draw, so a failure repeats.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "interop/accelerate.hpp"
#include "interop/config_import.hpp"
#include "interop/habana.hpp"
#include "interop/launch_export.hpp"
#include "interop/neuron.hpp"
#include "interop/smp_v2.hpp"
#include "interop/torchtitan.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"
#include "support/framework_cluster.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace framework_exports_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;
namespace fw = shardplan::frameworks;

template <class T>
T pick(std::mt19937& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

// One configuration of llama3.1-8b on `devices` inside `table`.
sim::ParallelConfig draw(const fw::KnobTable& k, int devices, std::mt19937& rng) {
  sim::ParallelConfig c;
  c.tp = k.tensor_parallel ? pick(rng, std::vector<int>{1, 2, 4}) : 1;
  c.pp = k.schedules.empty() ? 1 : pick(rng, std::vector<int>{1, 2});
  c.cp = k.cp_kinds.empty() ? 1 : pick(rng, std::vector<int>{1, 2});
  if (c.cp > 1) c.cp_kind = pick(rng, k.cp_kinds);
  c.dp = devices / (c.tp * c.pp * c.cp);
  if (c.pp > 1) {
    c.schedule = pick(rng, k.schedules);
    if (c.schedule == sim::PipelineSchedule::interleaved || sim::v_shaped(c.schedule)) c.virtual_stages = 2;
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
  // What the table ties together: SMP v2's model parallelism and FP8 run its fused layers.
  if (k.model_parallel_needs_fused_layers && (c.tp > 1 || c.cp > 1 || c.ep > 1 || c.uses_fp8()))
    c.fusion = sim::Fusion::megatron;
  c.micro_batch_size = 1;
  c.global_batch_size = k.gradient_accumulation ? 64 : c.dp;
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

// The export's files, named; the first is the one `--import` reads (it names the others).
using Files = std::vector<std::pair<std::string, std::string>>;
using Export = std::function<Files(const formats::Plan&)>;

// The files written to a fresh folder and the first imported back, as `simulate --import` does.
ImportResult through_files(const Files& files, const ImportContext& ctx) {
  const testing::TempDir dir("framework_export");
  for (const auto& [name, text] : files) dir.write(name, text);
  return import_config_file(dir.file(files.front().first), ctx);
}

using testing::cluster_for;

// `imports_as`: the framework `--import` names for the files (NeMo's runs take Megatron's arguments).
void check_framework(const std::string& spec, const std::string& imports_as, const Export& make, int draws = 40) {
  const fw::FrameworkModel model = fw::parse_framework_spec(spec, "test");
  std::mt19937 rng(20261129);
  int valid = 0;
  for (int i = 0; i < draws; ++i) {
    formats::Plan p;
    p.model = sim::load_model("llama3.1-8b");
    p.cluster = cluster_for(model.runs);
    sim::ParallelConfig cfg = draw(model.runs, p.cluster.devices(), rng);
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
      const ImportResult back = through_files(make(p), ctx);
      EXPECT_EQ(back.framework, imports_as) << what;
      expect_same(cfg, back.config, what);
    } catch (const sim::InputError& e) { ADD_FAILURE() << what << "\n  export or import refused: " << e.what(); }
  }
  EXPECT_GE(valid, draws / 3) << spec << ": too few drawn configurations are valid to say anything";
}

std::string with_newline(std::string s) { return s.empty() || s.back() == '\n' ? s : s + "\n"; }

TEST(FrameworkExports, MegatronCoreRunsEveryCombinationItsTableAllows) {
  check_framework("megatron", "megatron", [](const formats::Plan& p) {
    return Files{{"megatron_args.sh", with_newline(megatron_command_line(p))}};
  });
}

TEST(FrameworkExports, NemoRunsEveryCombinationItsTableAllowsThroughMegatronArguments) {
  check_framework("nemo", "megatron", [](const formats::Plan& p) {
    return Files{{"megatron_args.sh", with_newline(megatron_command_line(p))}};
  });
}

TEST(FrameworkExports, TorchtitanRunsEveryCombinationItsTableAllows) {
  check_framework("torchtitan", "torchtitan", [](const formats::Plan& p) {
    return Files{{"job.toml", torchtitan_toml(p)}};
  });
}

TEST(FrameworkExports, DeepSpeedRunsEveryCombinationItsTableAllows) {
  check_framework("deepspeed", "deepspeed", [](const formats::Plan& p) {
    return Files{{"ds_config.json", deepspeed_config(p).dump(2)}};
  });
}

TEST(FrameworkExports, AccelerateFsdpRunsEveryCombinationItsTableAllows) {
  check_framework("accelerate-fsdp", "accelerate-fsdp", [](const formats::Plan& p) {
    return Files{{"accelerate.yaml", accelerate_yaml(p)}};
  });
}

TEST(FrameworkExports, SmpV2RunsEveryCombinationItsTableAllows) {
  check_framework("smp-v2", "smp-v2", [](const formats::Plan& p) {
    return Files{{"smp_v2.json", smp_v2_config(p).dump(2)}};
  });
}

TEST(FrameworkExports, NeuronxDistributedRunsEveryCombinationItsTableAllows) {
  check_framework("neuronx-distributed", "neuronx-distributed", [](const formats::Plan& p) {
    return Files{{"neuron_launch.sh", with_newline(neuron_command_line(p))}};
  });
}

TEST(FrameworkExports, OptimumHabanaRunsEveryCombinationItsTableAllows) {
  check_framework("optimum-habana", "optimum-habana", [](const formats::Plan& p) {
    return Files{{"habana_launch.sh", with_newline(habana_command_line(p, "habana_ds_config.json"))},
                 {"habana_ds_config.json", habana_deepspeed_config(p).dump(2)}};
  });
}

}  // namespace framework_exports_test
}  // namespace shardplan::interop
