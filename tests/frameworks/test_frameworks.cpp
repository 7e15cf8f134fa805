// The framework models (frameworks/): every registered model at every version is well formed, its
// defaults are a configuration it can itself run, named knobs are refused with one line, and the
// defaults fill exactly what a run does not write.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "frameworks/apply.hpp"
#include "frameworks/fitted_efficiency.hpp"
#include "frameworks/registry.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"
#include "support/input_error.hpp"

namespace shardplan::frameworks {
namespace {

using nlohmann::json;
using testing::input_error_of;

const char* profile_for(sim::DeviceRuntime r) {
  switch (r) {
    case sim::DeviceRuntime::neuron:
      return "trn1.32xlarge-neuroncore";
    case sim::DeviceRuntime::synapse:
      return "gaudi2-hls2";
    case sim::DeviceRuntime::cpu:
      return "local-cpu-2core";
    case sim::DeviceRuntime::cuda:
      break;
  }
  return "p5.48xlarge";
}

// One node's data-parallel configuration in config keys: what a run writes at the least.
json minimal_config(int devices) {
  return {{"tensor_parallel", 1},  {"pipeline_parallel", 1},       {"data_parallel", devices},
          {"micro_batch_size", 1}, {"global_batch_size", devices}, {"seq_len", 2048}};
}

TEST(FrameworkRegistry, EveryVersionBuildsWithItsOwnNameVersionAndSourcedFacts) {
  for (const auto& e : registry()) {
    ASSERT_FALSE(e.versions.empty()) << e.name;
    for (const auto& v : e.versions) {
      const FrameworkModel fw = find_framework(e.name, v, "test");
      EXPECT_EQ(fw.name, e.name);
      EXPECT_EQ(fw.version, v);
      EXPECT_FALSE(fw.display.empty()) << e.name;
      EXPECT_FALSE(fw.runs.runtimes.empty()) << e.name << "@" << v;
      EXPECT_FALSE(fw.facts.empty()) << e.name << "@" << v << " cites nothing";
      for (const Fact& f : fw.facts) EXPECT_FALSE(f.source.empty()) << e.name << ": " << f.what;
    }
    EXPECT_EQ(find_framework(e.name, "", "test").version, e.versions.back()) << "a bare name is the newest";
  }
}

// A run that writes only its degrees and batch gets the framework's defaults, and the framework
// can run that configuration: its defaults lie inside its own knob table.
TEST(FrameworkRegistry, DefaultsAreAConfigurationTheFrameworkRuns) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  for (const auto& e : registry()) {
    for (const auto& v : e.versions) {
      const FrameworkModel fw = find_framework(e.name, v, "test");
      sim::ClusterSpec c{sim::load_hardware(profile_for(fw.runs.runtimes.front())), 1, 0};
      json config = minimal_config(c.devices());
      config["zero_stage"] = fw.runs.zero_stages.front();
      sim::ParallelConfig cfg = config_with_framework(fw, config, "test");
      EXPECT_NO_THROW(sim::validate_config(m, c, cfg)) << e.name << "@" << v;
      EXPECT_EQ(why_not(fw, cfg, c), std::nullopt) << e.name << "@" << v << ": " << why_not(fw, cfg, c).value_or("");
      EXPECT_EQ(cfg.framework.name, e.name + "@" + v);
    }
  }
}

TEST(FrameworkRegistry, UnknownNamesAndVersionsAreOneLineNamingTheField) {
  const std::string name = input_error_of([] { parse_framework_spec("megatorn", "--framework"); });
  EXPECT_NE(name.find("--framework: unknown framework 'megatorn'"), std::string::npos) << name;
  EXPECT_NE(name.find("torchtitan"), std::string::npos) << "lists what exists: " << name;
  EXPECT_EQ(name.find('\n'), std::string::npos);
  const std::string version = input_error_of([] { parse_framework_spec("megatron@2019", "--framework"); });
  EXPECT_NE(version.find("unknown megatron version '2019' (expected one of: 2021, 2022, core)"), std::string::npos)
      << version;
  const std::string shape = input_error_of([] { framework_from_json(json{{"version", "2022"}}, "runs[0].framework"); });
  EXPECT_NE(shape.find("runs[0].framework: expected {\"name\""), std::string::npos) << shape;
}

TEST(FrameworkDefaults, TheEraDecidesTheAttentionKernelAndFusion) {
  const json c = minimal_config(8);
  const auto m2021 = config_with_framework(parse_framework_spec("megatron@2021", "t"), c, "t");
  const auto core = config_with_framework(parse_framework_spec("megatron", "t"), c, "t");
  const auto titan = config_with_framework(parse_framework_spec("torchtitan", "t"), c, "t");
  EXPECT_EQ(m2021.attention, sim::AttentionKind::eager);
  EXPECT_EQ(m2021.fusion, sim::Fusion::megatron);
  EXPECT_EQ(core.attention, sim::AttentionKind::flash);
  EXPECT_EQ(titan.fusion, sim::Fusion::eager);
  EXPECT_EQ(config_with_framework(parse_framework_spec("llm-foundry@2023", "t"), c, "t").attention,
            sim::AttentionKind::flash1);
  EXPECT_EQ(config_with_framework(parse_framework_spec("hf-peft@4.35", "t"), c, "t").attention,
            sim::AttentionKind::eager);
}

// DeepSpeed 0.4.0's per-tensor fetch is its ZeRO-3 behaviour; below stage 3 nothing is fetched.
TEST(FrameworkDefaults, TheZero3FetchAppliesAtStage3Only) {
  const FrameworkModel ds = parse_framework_spec("deepspeed@0.4.0", "t");
  json c = minimal_config(8);
  c["zero_stage"] = 3;
  EXPECT_EQ(config_with_framework(ds, c, "t").zero3_fetch, sim::Zero3Fetch::per_tensor_sync);
  c["zero_stage"] = 1;
  EXPECT_EQ(config_with_framework(ds, c, "t").zero3_fetch, sim::Zero3Fetch::prefetch);
  c["zero_stage"] = 3;
  EXPECT_EQ(config_with_framework(parse_framework_spec("deepspeed", "t"), c, "t").zero3_fetch,
            sim::Zero3Fetch::prefetch);
}

// torchtitan's [activation_checkpoint] default: mode selective, option "2" (job_config.py:651-659).
TEST(FrameworkDefaults, TorchtitanCheckpointsEverySecondBlockUnlessTold) {
  const FrameworkModel titan = parse_framework_spec("torchtitan", "t");
  json c = minimal_config(8);
  const auto cfg = config_with_framework(titan, c, "t");
  EXPECT_EQ(cfg.recompute, sim::Recompute::full);
  EXPECT_EQ(cfg.recompute_every, 2);
  c["recompute"] = "op_sac";
  c["recompute_every"] = 0;
  const auto op = config_with_framework(titan, c, "t");
  EXPECT_EQ(op.recompute, sim::Recompute::op_sac);
  const sim::ClusterSpec p5{sim::load_hardware("p5.48xlarge"), 1, 0};
  EXPECT_EQ(why_not(titan, op, p5), std::nullopt);
  EXPECT_NE(why_not(parse_framework_spec("megatron", "t"), op, p5).value_or("").find("recompute op_sac"),
            std::string::npos);
  // A recompute the user names other than full leaves no every-N-th-block default behind.
  json none = minimal_config(8);
  none["recompute"] = "none";
  const auto plain = config_with_framework(titan, none, "t");
  EXPECT_EQ(plain.recompute, sim::Recompute::none);
  EXPECT_EQ(plain.recompute_every, 0);
}

TEST(FrameworkDefaults, WhatTheRunWritesWins) {
  json c = minimal_config(8);
  c["attention"] = "flash";
  c["fusion"] = "eager";
  const auto cfg = config_with_framework(parse_framework_spec("megatron@2021", "t"), c, "t");
  EXPECT_EQ(cfg.attention, sim::AttentionKind::flash);
  EXPECT_EQ(cfg.fusion, sim::Fusion::eager);
}

// Megatron forces fp32 accumulation for bf16 only (arguments.py); at ZeRO 3 there is nothing to
// accumulate across micro-batches, and an explicit param stays param.
TEST(FrameworkDefaults, PrecisionSpecificDefaultsApplyWhereTheConfigurationAllowsThem) {
  const FrameworkModel fw = parse_framework_spec("megatron", "t");
  json c = minimal_config(8);
  EXPECT_EQ(config_with_framework(fw, c, "t").grad_accum_dtype, sim::GradAccumDtype::fp32);
  c["precision"] = "fp16";
  EXPECT_EQ(config_with_framework(fw, c, "t").grad_accum_dtype, sim::GradAccumDtype::param);
  c["precision"] = "bf16";
  c["zero_stage"] = 3;
  EXPECT_EQ(config_with_framework(fw, c, "t").grad_accum_dtype, sim::GradAccumDtype::param);
  c["zero_stage"] = 1;
  c["grad_accum_dtype"] = "param";
  EXPECT_EQ(config_with_framework(fw, c, "t").grad_accum_dtype, sim::GradAccumDtype::param);
  EXPECT_EQ(config_with_framework(parse_framework_spec("nemo", "t"), minimal_config(8), "t").grad_accum_dtype,
            sim::GradAccumDtype::param)
      << "NeMo's distributed_fused_adam reduces in bf16";
}

// The CLI's path: defaults over a built configuration, except the keys the user gave.
TEST(FrameworkDefaults, ApplyDefaultsLeavesExplicitKeys) {
  sim::ParallelConfig cfg;
  cfg.attention = sim::AttentionKind::flash;
  cfg.fusion = sim::Fusion::eager;
  apply_defaults(parse_framework_spec("megatron@2022", "t"), cfg, {"attention"});
  EXPECT_EQ(cfg.attention, sim::AttentionKind::flash);
  EXPECT_EQ(cfg.fusion, sim::Fusion::megatron);
}

TEST(FrameworkKnobs, EachRefusalNamesTheKnob) {
  const sim::ClusterSpec p5{sim::load_hardware("p5.48xlarge"), 2, 0};
  sim::ParallelConfig cfg;
  cfg.pp = 4;
  cfg.dp = 4;
  cfg.schedule = sim::PipelineSchedule::interleaved;
  EXPECT_NE(why_not(parse_framework_spec("deepspeed", "t"), cfg, p5).value_or("").find("pipeline schedule interleaved"),
            std::string::npos);
  cfg.schedule = sim::PipelineSchedule::one_f_one_b;
  cfg.zero_stage = 2;
  EXPECT_NE(why_not(parse_framework_spec("deepspeed", "t"), cfg, p5).value_or("").find("with pipeline parallelism"),
            std::string::npos);
  sim::ParallelConfig cp;
  cp.cp = 2;
  cp.dp = 8;
  cp.cp_kind = sim::CpKind::all_to_all;
  EXPECT_NE(why_not(parse_framework_spec("torchtitan", "t"), cp, p5).value_or("").find("context-parallel kind"),
            std::string::npos);
  cp.cp_kind = sim::CpKind::ring;
  EXPECT_NE(why_not(parse_framework_spec("torchtitan", "t"), cp, p5).value_or("").find("ZeRO stage 0 beside"),
            std::string::npos)
      << "torchtitan's DDP runs only without TP, PP and CP";
  cp.zero_stage = 3;
  EXPECT_EQ(why_not(parse_framework_spec("torchtitan", "t"), cp, p5), std::nullopt);
  sim::ParallelConfig dp;
  dp.dp = 16;
  EXPECT_NE(why_not(parse_framework_spec("neuronx-distributed", "t"), dp, p5).value_or("").find("driven by cuda"),
            std::string::npos);
  EXPECT_NE(why_not(parse_framework_spec("hf-peft", "t"), dp, p5).value_or("").find("more than one node"),
            std::string::npos);
  dp.zero_stage = 3;
  EXPECT_NE(why_not(parse_framework_spec("megatron@2021", "t"), dp, p5).value_or("").find("ZeRO stage 3"),
            std::string::npos);
}

// Every framework's compute_efficiency is its fitted row, or 1 with a fact saying it has no runs;
// the term divides compute time only (memory is untouched).
TEST(FrameworkEfficiency, EachFrameworkCarriesItsFitOrTheCommonRate) {
  for (const auto& e : registry()) {
    const FrameworkModel fw = find_framework(e.name, "", "test");
    const auto& t = fitted_efficiencies();
    const auto row = std::find_if(t.begin(), t.end(), [&](const FittedEfficiency& f) { return f.framework == e.name; });
    const double expected = row == t.end() ? 1.0 : row->compute_efficiency;
    EXPECT_DOUBLE_EQ(fw.terms.compute_efficiency, expected) << e.name;
    const bool cited = std::any_of(fw.facts.begin(), fw.facts.end(), [](const Fact& f) {
      return f.what.starts_with("compute_efficiency") && !f.source.empty();
    });
    EXPECT_TRUE(cited) << e.name;
  }
  for (const auto& f : fitted_efficiencies()) {
    EXPECT_GT(f.compute_efficiency, 0.5) << f.framework;
    EXPECT_LT(f.compute_efficiency, 1.5) << f.framework;
    EXPECT_NO_THROW(find_framework(std::string(f.framework), "", "test")) << f.framework;
  }
}

TEST(FrameworkEfficiency, ItSlowsComputeAndLeavesMemory) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::ClusterSpec c{sim::load_hardware("p4de.24xlarge"), 1, 8};
  sim::ParallelConfig base = config_with_framework(find_framework("megatron", "core", "test"), minimal_config(8), "t");
  base.framework.compute_efficiency = 1.0;
  sim::ParallelConfig slow = base;
  slow.framework.compute_efficiency = 0.5;
  const sim::Prediction a = sim::simulate(m, c, base), b = sim::simulate(m, c, slow);
  EXPECT_GT(b.time.step_s, 1.4 * a.time.step_s);  // compute-bound: close to twice
  EXPECT_LT(b.time.step_s, 2.0 * a.time.step_s + 1e-9);
  EXPECT_DOUBLE_EQ(b.worst.total(), a.worst.total());
  EXPECT_NEAR(b.mfu * b.time.step_s, a.mfu * a.time.step_s, 1e-12);  // MFU keeps the datasheet peak
}

// Which stacks' full recompute stops early: those that checkpoint with PyTorch's non-reentrant
// checkpoint (Composer's and Accelerate's checkpoint_wrapper(NO_REENTRANT), fms-fsdp's); not the
// reentrant ones (Megatron's, DeepSpeed's) nor torchtitan, which turns early stop off. Each that
// does says so in a sourced fact, and on a model the recompute costs less.
TEST(FrameworkRecompute, NonReentrantCheckpointsStopEarly) {
  for (const char* name : {"llm-foundry", "fms-fsdp", "accelerate-fsdp"}) {
    const FrameworkModel fw = find_framework(name, "", "test");
    EXPECT_TRUE(fw.terms.recompute_stops_early) << name;
    EXPECT_TRUE(std::any_of(fw.facts.begin(), fw.facts.end(), [](const Fact& f) {
      return f.what.find("NO_REENTRANT") != std::string::npos && !f.source.empty();
    })) << name;
  }
  for (const char* name : {"megatron", "nemo", "deepspeed", "megatron-deepspeed", "torchtitan", "shardrun"})
    EXPECT_FALSE(find_framework(name, "", "test").terms.recompute_stops_early) << name;

  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::ClusterSpec c{sim::load_hardware("p4de.24xlarge"), 1, 8};
  json j = minimal_config(8);
  j["recompute"] = "full";
  j["zero_stage"] = 3;
  sim::ParallelConfig foundry = config_with_framework(find_framework("llm-foundry", "", "test"), j, "t");
  sim::ParallelConfig rerun = foundry;
  rerun.framework.recompute_stops_early = false;
  const sim::Prediction a = sim::simulate(m, c, foundry), b = sim::simulate(m, c, rerun);
  EXPECT_LT(a.time.recompute_s, b.time.recompute_s);
  EXPECT_LT(a.hardware_flops_per_step, b.hardware_flops_per_step);
  EXPECT_DOUBLE_EQ(a.model_flops_per_step, b.model_flops_per_step);
  EXPECT_DOUBLE_EQ(a.worst.total(), b.worst.total());
}

// NeMo's distributed_fused_adam (overlap_param_sync) gathers the updated weights behind the next
// step's forward: its ZeRO-1 all-gather hides but for the first bucket. Megatron-LM's default gathers
// them after the step. Compute and memory are the same either way.
TEST(FrameworkOptimizer, NemoGathersTheWeightsBehindTheNextForward) {
  const FrameworkModel nemo = find_framework("nemo", "", "test");
  EXPECT_TRUE(nemo.terms.param_gather_overlaps_forward);
  EXPECT_TRUE(std::any_of(nemo.facts.begin(), nemo.facts.end(), [](const Fact& f) {
    return f.what.find("overlap_param_sync") != std::string::npos && !f.source.empty();
  }));
  EXPECT_FALSE(find_framework("megatron", "", "test").terms.param_gather_overlaps_forward);
  EXPECT_FALSE(find_framework("deepspeed", "", "test").terms.param_gather_overlaps_forward);

  const sim::ModelSpec m = sim::load_model("llama2-13b");
  const sim::ClusterSpec c{sim::load_hardware("p5.48xlarge"), 2, 8};
  json j = minimal_config(16);
  j["tensor_parallel"] = 2;
  j["data_parallel"] = 8;
  j["micro_batch_size"] = 2;
  j["global_batch_size"] = 32;
  j["zero_stage"] = 1;
  sim::ParallelConfig overlapped = config_with_framework(nemo, j, "t");
  sim::ParallelConfig after_step = overlapped;
  after_step.framework.param_gather_overlaps_forward = false;
  const sim::Prediction a = sim::simulate(m, c, overlapped), b = sim::simulate(m, c, after_step);
  EXPECT_GT(b.time.dp_exposed_comm_s, 0.0);
  EXPECT_LT(a.time.dp_exposed_comm_s, b.time.dp_exposed_comm_s);
  EXPECT_DOUBLE_EQ(a.time.dp_total_comm_s, b.time.dp_total_comm_s);
  EXPECT_DOUBLE_EQ(a.time.forward_compute_s, b.time.forward_compute_s);
  EXPECT_DOUBLE_EQ(a.worst.total(), b.worst.total());
}

// The search's fast path (apply_kernel_defaults, no JSON round trip) gives what apply_defaults gives
// with every key but the kernel-level ones written, for every framework and version, over random
// configurations: precision, degrees, recompute, schedule, FP8, the kernels' own fields.
TEST(FrameworkRegistry, KernelDefaultsFastPathEqualsApplyDefaults) {
  static const std::set<std::string> kKernel = {"attention", "fusion", "mixed_precision", "grad_accum_dtype",
                                                "zero3_fetch"};
  std::mt19937 rng(20261129);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int compared = 0;
  for (const auto& e : registry())
    for (const auto& v : e.versions) {
      const FrameworkModel fw = find_framework(e.name, v, "test");
      for (int i = 0; i < 40; ++i) {
        sim::ParallelConfig cfg;
        cfg.precision = static_cast<sim::Precision>(pick(3));
        cfg.tp = 1 << pick(3);
        cfg.cp = 1 << pick(2);
        cfg.pp = 1 << pick(2);
        cfg.zero_stage = pick(4);
        cfg.recompute = static_cast<sim::Recompute>(pick(3));
        cfg.recompute_every = pick(3);
        cfg.tp_comm_overlap = pick(2) == 1;
        cfg.fp8 = pick(2) ? sim::Fp8Recipe::delayed : sim::Fp8Recipe::none;
        cfg.attention = static_cast<sim::AttentionKind>(pick(3));
        cfg.fusion = static_cast<sim::Fusion>(pick(3));
        cfg.zero3_fetch = static_cast<sim::Zero3Fetch>(pick(2));
        sim::ParallelConfig slow = cfg, fast = cfg;
        std::set<std::string> written;  // what the old path took as explicit: the keys cfg's JSON writes
        const json j = sim::to_json(cfg);
        for (const auto& item : j.items())
          if (!kKernel.count(item.key())) written.insert(item.key());
        apply_defaults(fw, slow, written);
        apply_kernel_defaults(fw, kernel_defaults(fw, cfg.precision), fast);
        EXPECT_EQ(sim::to_json(slow), sim::to_json(fast)) << e.name << "@" << v << " case " << i;
        ++compared;
      }
    }
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace shardplan::frameworks
