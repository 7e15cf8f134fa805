// DeepSpeed ds_config export (golden files for every golden plan) and its round trip through the
// importer: the layout settings read back; fp32 gradient accumulation travels as data_types.
#include <gtest/gtest.h>

#include "interop/config_import.hpp"
#include "interop/golden.hpp"
#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {
namespace deepspeed_interop_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using nlohmann::json;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

ImportResult round_trip(const formats::Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  ctx.seq_len = p.config.seq_len;  // a ds_config has no sequence length
  return import_deepspeed(deepspeed_config(p), ctx, "ds_config.json");
}

void expect_same_layout(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  EXPECT_EQ(got.recompute == sim::Recompute::none, want.recompute == sim::Recompute::none);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.grad_accum_dtype, want.grad_accum_dtype);
}

TEST(DeepSpeedInterop, GoldenConfigs) {
  for (const char* name : {"dense-3d", "zero3-lora", "moe-cp", "neuron-3d"})
    expect_golden(name, "ds_config.json", deepspeed_config(golden_plan(name)).dump(2) + "\n");
}

// The MoE + CP plan has no round trip: ds_config has no context parallelism (its notes say how
// DeepSpeed-Ulysses or Megatron run it), so its cp ranks would read back as data parallel.
TEST(DeepSpeedInterop, ExportReadsBackToThePlansLayout) {
  for (const char* name : {"dense-3d", "zero3-lora", "neuron-3d"}) {
    SCOPED_TRACE(name);
    expect_same_layout(round_trip(golden_plan(name)).config, golden_plan(name).config);
  }
  formats::Plan fp32_accum = golden_plan("neuron-3d");
  fp32_accum.config.grad_accum_dtype = sim::GradAccumDtype::fp32;
  fp32_accum.config.offload_optimizer = true;
  const json ds = deepspeed_config(fp32_accum);
  EXPECT_EQ(ds["data_types"]["grad_accum_dtype"], "fp32");
  expect_same_layout(round_trip(fp32_accum).config, fp32_accum.config);
}

TEST(DeepSpeedInterop, ThroughputLinesAreSwitchedOn) {
  // DeepSpeed prints nothing per step unless steps_per_print is set and the logger shows INFO;
  // `shardplan runs import --format deepspeed` reads those lines.
  const json ds = deepspeed_config(golden_plan("zero3-lora"));
  EXPECT_GT(ds["steps_per_print"].get<int>(), 0);
  EXPECT_EQ(ds["log_level"], "info");
  EXPECT_TRUE(round_trip(golden_plan("zero3-lora")).warnings.empty());
}

TEST(DeepSpeedInterop, AnUnknownAccumulationDtypeIsNamed) {
  ImportContext ctx;
  ctx.devices = 8;
  const json ds = {{"train_micro_batch_size_per_gpu", 1}, {"data_types", {{"grad_accum_dtype", "fp8"}}}};
  try {
    import_deepspeed(ds, ctx, "ds.json");
    FAIL() << "accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data_types.grad_accum_dtype"), std::string::npos) << e.what();
  }
}

}  // namespace deepspeed_interop_test
}  // namespace shardplan::interop
