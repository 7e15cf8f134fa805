// SageMaker model parallel v2 export (golden files) and import: the estimator document reads back
// to the plan's layout; what SMP v2 cannot run (pipelines, EP with TP/CP, other instances) is
// refused; the v1 parameters still import as v1.
#include <gtest/gtest.h>

#include "interop/golden.hpp"
#include "interop/smp_v2.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {
namespace smp_v2_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using nlohmann::json;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

formats::Plan replanned(formats::Plan p, const std::string& hw, int nodes, void (*edit)(sim::ParallelConfig&)) {
  edit(p.config);
  return shardplan::testing::plan_of(p.model.name, hw, nodes, p.config);
}

// What SMP v2 can run, one per golden plan: the dense plan without its pipeline (pp folded into
// ZeRO-3 data parallelism), the LoRA plan on p4de instead of Gaudi2, the MoE plan with experts only.
formats::Plan dense() {
  return replanned(golden_plan("dense-3d"), "p5.48xlarge", 4, [](sim::ParallelConfig& c) {
    c.pp = 1, c.dp = 8, c.schedule = sim::PipelineSchedule::one_f_one_b, c.virtual_stages = 1;
    c.zero_stage = 3, c.sharding_degree = 0, c.global_batch_size = 8, c.recompute = sim::Recompute::full;
  });
}
formats::Plan lora() {
  return replanned(golden_plan("zero3-lora"), "p4de.24xlarge", 1,
                   [](sim::ParallelConfig& c) { c.micro_batch_size = 2, c.global_batch_size = 16; });
}
formats::Plan moe() {
  return replanned(golden_plan("moe-cp"), "p5.48xlarge", 4, [](sim::ParallelConfig& c) {
    c.tp = 1, c.cp = 1, c.dp = 32, c.ep = 8, c.etp = 1, c.sequence_parallel = false;
    c.zero_stage = 3, c.sharding_degree = 8, c.global_batch_size = 32, c.seq_len = 4096;
    c.recompute = sim::Recompute::full;
  });
}

ImportContext context_of(const formats::Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  return ctx;
}

void expect_same_layout(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, 1);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.cp, want.cp);
  EXPECT_EQ(got.ep, want.ep);
  EXPECT_EQ(got.expert_tp(), want.ep > 1 ? 1 : got.expert_tp());
  EXPECT_EQ(got.zero_stage, want.zero_stage == 1 ? 2 : want.zero_stage);  // ZeRO-1 runs as ZeRO-2 (noted)
  EXPECT_EQ(got.shard_group(), want.zero_stage == 0 ? got.shard_group() : want.shard_group());
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.micro_batch_size * want.dp);  // no gradient accumulation in the script
  EXPECT_EQ(got.seq_len, want.seq_len);
  EXPECT_EQ(got.recompute, want.recompute == sim::Recompute::none ? sim::Recompute::none : sim::Recompute::full);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.uses_fp8(), want.uses_fp8());
  EXPECT_EQ(got.offload_activations, want.offload_activations);
}

TEST(SmpV2, GoldenDocuments) {
  expect_golden("dense-3d", "smp_v2_pp1.json", smp_v2_config(dense()).dump(2) + "\n");
  expect_golden("zero3-lora", "smp_v2_p4de.json", smp_v2_config(lora()).dump(2) + "\n");
  expect_golden("moe-cp", "smp_v2_ep_only.json", smp_v2_config(moe()).dump(2) + "\n");
}

TEST(SmpV2, ParametersAreWhereTheEstimatorTakesThem) {
  const json d = smp_v2_config(dense());
  EXPECT_EQ(d["instance_type"], "ml.p5.48xlarge");
  EXPECT_EQ(d["instance_count"], 4);
  EXPECT_EQ(d["distribution"]["torch_distributed"]["enabled"], true);
  const json& p = d["distribution"]["smdistributed"]["modelparallel"]["parameters"];
  EXPECT_EQ(p["tensor_parallel_degree"], 4);
  EXPECT_EQ(p["hybrid_shard_degree"], 8);                        // the ZeRO-3 group: all 8 data-parallel ranks
  EXPECT_EQ(d["hyperparameters"]["use_smp_implementation"], 1);  // TP needs torch.sagemaker.transform
  // A sharding group of 8 of the 32 expert-plan ranks is hybrid sharding over 8.
  EXPECT_EQ(smp_v2_config(moe())["distribution"]["smdistributed"]["modelparallel"]["parameters"]["hybrid_shard_degree"],
            8);
}

TEST(SmpV2, ExportReadsBackToThePlansLayout) {
  for (const formats::Plan& p : {dense(), lora(), moe()}) {
    const ImportResult r = import_smp_v2(smp_v2_config(p), context_of(p), "smp_v2.json");
    expect_same_layout(r.config, p.config);
  }
  // Variants: context parallelism (its ranks are in the FSDP group), ZeRO-2, no sharding, offload, FP8.
  using Edit = void (*)(sim::ParallelConfig&);
  for (const Edit edit : {Edit([](sim::ParallelConfig& c) { c.tp = 2, c.cp = 2, c.dp = 8, c.seq_len = 16384; }),
                          Edit([](sim::ParallelConfig& c) { c.zero_stage = 2; }), Edit([](sim::ParallelConfig& c) {
                            c.zero_stage = 0, c.sharding_degree = 0, c.recompute = sim::Recompute::none;
                          }),
                          Edit([](sim::ParallelConfig& c) { c.offload_activations = true; }),
                          Edit([](sim::ParallelConfig& c) { c.fp8 = sim::Fp8Recipe::delayed; })}) {
    const formats::Plan p = replanned(dense(), "p5.48xlarge", 4, edit);
    const ImportResult r = import_smp_v2(smp_v2_config(p), context_of(p), "smp_v2.json");
    expect_same_layout(r.config, p.config);
    if (p.config.cp > 1) EXPECT_EQ(r.config.shard_group(), p.config.shard_group());
  }
}

TEST(SmpV2, WhatItCannotRunIsRefusedWithTheReason) {
  const auto message = [](const formats::Plan& p) {
    try {
      smp_v2_config(p);
    } catch (const sim::InputError& e) { return std::string(e.what()); }
    return std::string();
  };
  EXPECT_NE(message(golden_plan("dense-3d")).find("no pipeline parallelism"), std::string::npos);
  EXPECT_NE(message(golden_plan("moe-cp")).find("expert parallelism with tensor or context"), std::string::npos);
  EXPECT_NE(message(golden_plan("zero3-lora")).find("ml.p4d.24xlarge"), std::string::npos);
  EXPECT_NE(message(golden_plan("neuron-3d")).find("pipeline"), std::string::npos);
}

TEST(SmpV2, NotesSayWhatTheScriptRunsDifferently) {
  const formats::Plan p = replanned(dense(), "p5.48xlarge", 4, [](sim::ParallelConfig& c) {
    c.zero_stage = 1, c.global_batch_size = 32, c.recompute = sim::Recompute::selective;
  });
  const auto notes = smp_v2_notes(p);
  const auto mentions = [&](const std::string& s) {
    return std::any_of(notes.begin(), notes.end(),
                       [&](const std::string& n) { return n.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(mentions("no gradient accumulation"));
  EXPECT_TRUE(mentions("_hybrid_shard_zero2"));
  EXPECT_TRUE(mentions("selective recompute"));
}

TEST(SmpV2, ParametersAloneUseTheScriptsDefaultsWithAWarning) {
  ImportContext ctx;
  ctx.devices = 16;
  const json params = {{"tensor_parallel_degree", 2}, {"hybrid_shard_degree", 4}, {"random_seed", 12}};
  const ImportResult r = import_smp_v2(params, ctx, "params.json");
  EXPECT_EQ(r.config.tp, 2);
  EXPECT_EQ(r.config.dp, 8);
  EXPECT_EQ(r.config.zero_stage, 3);
  EXPECT_EQ(r.config.shard_group(), 4);
  EXPECT_EQ(r.config.micro_batch_size, 2);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("defaults"), std::string::npos);
  EXPECT_TRUE(is_smp_v2(params));
  EXPECT_FALSE(is_smp_v2(json{{"partitions", 2}, {"microbatches", 4}}));  // v1
}

TEST(SmpV2, MalformedSettingsAreNamed) {
  ImportContext ctx;
  ctx.devices = 16;
  const auto error = [&](const json& doc) {
    try {
      import_smp_v2(doc, ctx, "smp.json");
    } catch (const sim::InputError& e) { return std::string(e.what()); }
    return std::string();
  };
  EXPECT_NE(error({{"tensor_parallel_degree", 3}, {"hybrid_shard_degree", 0}}).find("tensor_parallel_degree"),
            std::string::npos);
  EXPECT_NE(error({{"hybrid_shard_degree", 3}}).find("hybrid_shard_degree"), std::string::npos);
  EXPECT_NE(error({{"hybrid_shard_degree", -1}}).find("hybrid_shard_degree"), std::string::npos);
  const json bad_strategy = {
      {"distribution", {{"smdistributed", {{"modelparallel", {{"parameters", {{"hybrid_shard_degree", 0}}}}}}}}},
      {"hyperparameters", {{"sharding_strategy", "zero_everything"}}}};
  EXPECT_NE(error(bad_strategy).find("sharding_strategy"), std::string::npos);
  EXPECT_NE(error({{"distribution", {{"smdistributed", {{"modelparallel", {{"enabled", true}}}}}}}})
                .find("no SMP v2 parameters"),
            std::string::npos);
}

}  // namespace smp_v2_test
}  // namespace shardplan::interop
