// Imports of DeepSpeed ds_configs and SageMaker model parallel parameters (fixtures in
// tests/data/import/), "auto" handling, batch consistency, warnings.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "interop/config_import.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::interop {
namespace config_import_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(SHARDPLAN_TEST_DATA_DIR) + "/import/" + name; }

ImportContext cluster_of(int devices, int seq_len = 4096) {
  ImportContext ctx;
  ctx.devices = devices;
  ctx.devices_per_node = 8;
  ctx.seq_len = seq_len;
  return ctx;
}

// The InputError's message, or "" when none was thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

bool any_warning_mentions(const ImportResult& r, const std::string& text) {
  return std::any_of(r.warnings.begin(), r.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

// The imported config must be usable as is: validate against llama2-70b on Gaudi2 nodes.
void expect_valid_for_llama70b(sim::ParallelConfig cfg, int nodes) {
  const sim::ModelSpec model = sim::load_model("llama2-70b");
  const sim::ClusterSpec cluster{sim::load_hardware("gaudi2-hls2"), nodes, 0};
  EXPECT_NO_THROW(sim::validate_config(model, cluster, cfg));
}

// --- DeepSpeed fixtures -------------------------------------------------------------------

TEST(ImportDeepSpeed, Zero3CpuOffloadRecipe) {
  const ImportResult r = import_config_file(fixture("ds_zero3_offload_bf16_lora.json"), cluster_of(8));
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 8);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.shard_group(), 8);
  EXPECT_TRUE(c.offload_optimizer);
  EXPECT_FALSE(c.offload_activations);
  EXPECT_EQ(c.micro_batch_size, 2);
  EXPECT_EQ(c.global_batch_size, 64);
  EXPECT_EQ(c.micro_batches(), 4);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_EQ(c.recompute, sim::Recompute::none);
  EXPECT_EQ(c.seq_len, 4096);
  // The ZeRO++ flag is reported; optimizer, scheduler, buckets are not.
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("zero_optimization.zero_quantized_weights"), std::string::npos);
  expect_valid_for_llama70b(c, 1);
}

TEST(ImportDeepSpeed, Zero2Bf16WithCheckpointing) {
  const ImportResult r = import_config_file(fixture("ds_zero2_bf16.json"), cluster_of(8));
  const auto& c = r.config;
  EXPECT_EQ(c.dp, 8);
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_FALSE(c.offload_optimizer);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.global_batch_size, 256);
  EXPECT_EQ(c.micro_batches(), 8);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_EQ(c.recompute, sim::Recompute::full);
  EXPECT_FALSE(c.offload_activations);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(ImportDeepSpeed, Zero2WithTensorParallelFromTheContext) {
  // tp 2 x pp 1 on 16 devices: dp 8 and 4 x 8 x 8 = 256 still holds.
  ImportContext ctx = cluster_of(16);
  ctx.tp = 2;
  const ImportResult r = import_config_file(fixture("ds_zero2_bf16.json"), ctx);
  EXPECT_EQ(r.config.tp, 2);
  EXPECT_EQ(r.config.dp, 8);
  expect_valid_for_llama70b(r.config, 2);
}

TEST(ImportDeepSpeed, AutoValuesNeedNumbersOrTheContext) {
  const std::string path = fixture("ds_hf_trainer_auto.json");
  ImportContext ctx = cluster_of(8);
  std::string e = error_of([&] { import_config_file(path, ctx); });
  EXPECT_NE(e.find("ds_hf_trainer_auto.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'train_micro_batch_size_per_gpu'"), std::string::npos) << e;
  EXPECT_NE(e.find("\"auto\""), std::string::npos) << e;
  EXPECT_NE(e.find("number"), std::string::npos) << e;

  ctx.micro_batch_size = 4;
  e = error_of([&] { import_config_file(path, ctx); });
  EXPECT_NE(e.find("'bf16.enabled'"), std::string::npos) << e;
  EXPECT_NE(e.find("\"auto\""), std::string::npos) << e;

  ctx.precision = sim::Precision::bf16;
  const ImportResult r = import_config_file(path, ctx);
  EXPECT_EQ(r.config.micro_batch_size, 4);
  EXPECT_EQ(r.config.micro_batches(), 1);  // "auto" accumulation: the Trainer's default
  EXPECT_EQ(r.config.global_batch_size, 32);
  EXPECT_EQ(r.config.zero_stage, 3);
  EXPECT_FALSE(r.config.offload_optimizer);
  EXPECT_EQ(r.config.precision, sim::Precision::bf16);
  EXPECT_TRUE(any_warning_mentions(r, "gradient_accumulation_steps"));
}

TEST(ImportDeepSpeed, AutoMicroBatchDerivedFromTheOtherTwo) {
  const json ds = {{"train_batch_size", 64},
                   {"gradient_accumulation_steps", 2},
                   {"train_micro_batch_size_per_gpu", "auto"},
                   {"bf16", {{"enabled", true}}}};
  const ImportResult r = import_deepspeed(ds, cluster_of(8), "ds.json");
  EXPECT_EQ(r.config.micro_batch_size, 4);
  EXPECT_EQ(r.config.global_batch_size, 64);
}

// --- DeepSpeed batch rules and errors -----------------------------------------------------

TEST(ImportDeepSpeed, InconsistentBatchSizesNameTheFields) {
  const json ds = {
      {"train_batch_size", 100}, {"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 2}};
  const std::string e = error_of([&] { import_deepspeed(ds, cluster_of(8), "ds.json"); });
  EXPECT_NE(e.find("ds.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'train_batch_size'"), std::string::npos) << e;
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu x gradient_accumulation_steps x dp = 4 x 2 x 8 = 64"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("got 100"), std::string::npos) << e;
}

TEST(ImportDeepSpeed, AnyTwoBatchFieldsDetermineTheThird) {
  const auto import = [](json ds) { return import_deepspeed(ds, cluster_of(8), "ds.json").config; };
  auto c = import({{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2}});
  EXPECT_EQ(c.micro_batches(), 4);
  c = import({{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 3}});
  EXPECT_EQ(c.global_batch_size, 48);
  c = import({{"train_batch_size", 16}});
  EXPECT_EQ(c.micro_batch_size, 2);
  EXPECT_EQ(c.micro_batches(), 1);
  c = import({{"train_micro_batch_size_per_gpu", 2}});
  EXPECT_EQ(c.global_batch_size, 16);
  EXPECT_EQ(c.precision, sim::Precision::fp32);  // neither bf16 nor fp16: DeepSpeed's fp32
  EXPECT_NE(error_of([&] {
              import({{"train_batch_size", 20}, { "train_micro_batch_size_per_gpu", 2 }});
            }).find("'train_batch_size'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              import({{ "gradient_accumulation_steps", 2 }});
            }).find("'train_micro_batch_size_per_gpu'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              import({{ "train_micro_batch_size_per_gpu", 0 }});
            }).find("'train_micro_batch_size_per_gpu'"),
            std::string::npos);
}

TEST(ImportDeepSpeed, FieldErrors) {
  const auto err = [](json ds, ImportContext ctx = cluster_of(8)) {
    ds["train_micro_batch_size_per_gpu"] = 1;
    return error_of([&] { import_deepspeed(ds, ctx, "ds.json"); });
  };
  EXPECT_NE(err({{"zero_optimization", {{"stage", 4}}}}).find("'zero_optimization.stage'"), std::string::npos);
  EXPECT_NE(err({{"zero_optimization", {{"stage", "auto"}}}}).find("'zero_optimization.stage'"), std::string::npos);
  EXPECT_NE(err({{"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "gpu"}}}}}})
                .find("'zero_optimization.offload_optimizer.device'"),
            std::string::npos);
  EXPECT_NE(
      err({{"zero_optimization", {{"stage", 3}, {"mics_shard_size", 3}}}}).find("'zero_optimization.mics_shard_size'"),
      std::string::npos);
  EXPECT_NE(err({{"bf16", {{"enabled", true}}}, {"fp16", {{"enabled", true}}}}).find("'fp16.enabled'"),
            std::string::npos);
  EXPECT_NE(err({{"tensor_parallel", {{"autotp_size", 3}}}}).find("'tensor_parallel.autotp_size'"), std::string::npos);
  ImportContext ctx = cluster_of(8);
  ctx.tp = 4;
  EXPECT_NE(err({{"tensor_parallel", {{"autotp_size", 2}}}}, ctx).find("'tensor_parallel.autotp_size'"),
            std::string::npos);
  ctx = cluster_of(8);
  ctx.micro_batch_size = 2;
  EXPECT_NE(err(json::object(), ctx).find("'train_micro_batch_size_per_gpu'"), std::string::npos);
  EXPECT_NE(err(json::object(), cluster_of(0)).find("device count"), std::string::npos);
  EXPECT_NE(error_of([] { import_deepspeed(json::array(), cluster_of(8), "ds.json"); }).find("JSON object"),
            std::string::npos);
}

TEST(ImportDeepSpeed, MicsOffloadAndUnknownKeys) {
  const json ds = {{"train_micro_batch_size_per_gpu", 1},
                   {"zero_optimization",
                    {{"stage", 3},
                     {"mics_shard_size", 4},
                     {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}}},
                     {"offload_param", {{"device", "cpu"}}},
                     {"some_future_knob", 1}}},
                   {"activation_checkpointing", {{"partition_activations", true}, {"cpu_checkpointing", true}}},
                   {"fp16", {{"enabled", true}}},
                   {"curriculum_learning", {{"enabled", false}}},
                   {"optimizer", {{"type", "Adam"}}}};
  const ImportResult r = import_deepspeed(ds, cluster_of(16), "ds.json");
  EXPECT_EQ(r.config.zero_stage, 3);
  EXPECT_EQ(r.config.sharding_degree, 4);
  EXPECT_TRUE(r.config.offload_optimizer);
  EXPECT_TRUE(r.config.offload_activations);
  EXPECT_EQ(r.config.recompute, sim::Recompute::full);
  EXPECT_EQ(r.config.precision, sim::Precision::fp16);
  EXPECT_TRUE(any_warning_mentions(r, "NVMe"));
  EXPECT_TRUE(any_warning_mentions(r, "offload_param"));
  EXPECT_TRUE(any_warning_mentions(r, "'zero_optimization.some_future_knob'"));
  EXPECT_TRUE(any_warning_mentions(r, "'curriculum_learning'"));
  EXPECT_FALSE(any_warning_mentions(r, "optimizer'"));
  EXPECT_EQ(r.warnings.size(), 4u);
}

// --- SageMaker model parallel -------------------------------------------------------------

TEST(ImportSmp, Tp8Pp4ShardedFixture) {
  ImportContext ctx = cluster_of(128);
  ctx.micro_batch_size = 2;
  const ImportResult r = import_config_file(fixture("smp_tp8_pp4_sdp.json"), ctx);
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 8);
  EXPECT_EQ(c.pp, 4);
  EXPECT_EQ(c.dp, 4);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.sharding_degree, 2);
  EXPECT_EQ(c.micro_batch_size, 2);
  EXPECT_EQ(c.micro_batches(), 8);
  EXPECT_EQ(c.global_batch_size, 64);
  EXPECT_EQ(c.schedule, sim::PipelineSchedule::one_f_one_b);  // SMP "interleaved" = 1F1B
  EXPECT_EQ(c.virtual_stages, 1);
  EXPECT_TRUE(c.offload_activations);
  EXPECT_EQ(c.recompute, sim::Recompute::full);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  expect_valid_for_llama70b(c, 16);
}

TEST(ImportSmp, WithoutBatchSizeAssumesOneAndWarns) {
  const ImportResult r = import_config_file(fixture("smp_tp8_pp4_sdp.json"), cluster_of(128));
  EXPECT_EQ(r.config.micro_batch_size, 1);
  EXPECT_EQ(r.config.global_batch_size, 32);
  EXPECT_TRUE(any_warning_mentions(r, "no batch size"));
}

TEST(ImportSmp, WrappedDistributionAndOtherSettings) {
  const json dist = {{"smdistributed",
                      {{"modelparallel",
                        {{"enabled", true},
                         {"parameters",
                          {{"pipeline_parallel_degree", 2},
                           {"microbatches", 4},
                           {"pipeline", "simple"},
                           {"shard_optimizer_state", true},
                           {"fp16", true},
                           {"ddp", true},
                           {"mystery", 1}}}}}}}};
  const ImportResult r = import_smp(dist, cluster_of(16), "estimator.json");
  EXPECT_EQ(r.config.pp, 2);
  EXPECT_EQ(r.config.tp, 1);
  EXPECT_EQ(r.config.dp, 8);
  EXPECT_EQ(r.config.zero_stage, 1);
  EXPECT_EQ(r.config.schedule, sim::PipelineSchedule::gpipe);
  EXPECT_EQ(r.config.precision, sim::Precision::fp16);
  EXPECT_TRUE(any_warning_mentions(r, "'smdistributed.modelparallel.parameters.mystery'"));
}

TEST(ImportSmp, FieldErrors) {
  const auto err = [](json p, int devices = 64) {
    return error_of([&] { import_smp(p, cluster_of(devices), "smp.json"); });
  };
  EXPECT_NE(err({{"pipeline", "fancy"}}).find("'pipeline'"), std::string::npos);
  EXPECT_NE(err({{"tensor_parallel_degree", 8}, {"partitions", 4}, {"sharded_data_parallel_degree", 3}})
                .find("'sharded_data_parallel_degree'"),
            std::string::npos);
  EXPECT_NE(err({{"tensor_parallel_degree", 3}}).find("tensor_parallel_degree"), std::string::npos);
  EXPECT_NE(err({{"bf16", true}, {"fp16", true}}).find("'fp16'"), std::string::npos);
  EXPECT_NE(err({{"microbatches", 0}}).find("'microbatches'"), std::string::npos);
  EXPECT_NE(err({{"partitions", 2}, {"pipeline_parallel_degree", 4}}).find("'pipeline_parallel_degree'"),
            std::string::npos);
}

TEST(ImportFile, NeitherFormatIsAnError) {
  EXPECT_NE(error_of([] { import_config_file(fixture("missing.json"), cluster_of(8)); }).find("missing.json"),
            std::string::npos);
}

}  // namespace config_import_test
}  // namespace shardplan::interop
