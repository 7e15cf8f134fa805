#pragma once
// Shared by the Accelerate (FSDP) export and import tests: plans on p5.48xlarge, import contexts,
// the error text of an import, and the round trip import(export(plan)).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "interop/accelerate.hpp"
#include "simulator/errors.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"

namespace shardplan::interop::accelerate_test {

namespace sim = shardplan::simulator;
using formats::Plan;
using shardplan::testing::input_error_of;
using shardplan::testing::plan_of;

// Llama 3.1 8B on `nodes` x p5.48xlarge (8 H100 each), data parallel over all, ZeRO-3, edited.
inline Plan p5_plan(int nodes, const std::function<void(sim::ParallelConfig&)>& edit = {},
                    const std::string& model = "llama3.1-8b") {
  sim::ParallelConfig c;
  c.dp = 8 * nodes;
  c.zero_stage = 3;
  c.micro_batch_size = 2;
  c.seq_len = 4096;
  c.precision = sim::Precision::bf16;
  if (edit) edit(c);
  return plan_of(model, "p5.48xlarge", nodes, c);
}

inline ImportContext context_of(const Plan& plan) {
  ImportContext ctx;
  ctx.devices = plan.cluster.devices();
  ctx.devices_per_node = plan.cluster.per_node();
  ctx.seq_len = plan.config.seq_len;
  ctx.micro_batch_size = plan.config.micro_batch_size;
  return ctx;
}

inline ImportContext devices(int n, int per_node = 8) {
  ImportContext ctx;
  ctx.devices = n;
  ctx.devices_per_node = per_node;
  ctx.seq_len = 2048;
  ctx.micro_batch_size = 4;
  return ctx;
}

inline bool any_mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

inline std::string import_error(const std::string& yaml, const ImportContext& ctx = devices(8)) {
  return input_error_of([&] { (void)import_accelerate(yaml, ctx, "acc.yaml"); });
}

// The configuration fields an Accelerate config carries, compared after import(export(plan)).
// ZeRO-1 comes back as 2 (FSDP has no ZeRO-1); selective recompute and sequence parallelism, which
// have no Accelerate setting, come back off; LoRA lives in the training script.
inline void expect_round_trip(const Plan& plan) {
  const auto& c = plan.config;
  const std::string yaml = accelerate_yaml(plan);
  const ImportResult r = import_accelerate(yaml, context_of(plan), "accelerate_fsdp.yaml");
  const auto& got = r.config;
  EXPECT_EQ(got.tp, c.tp);
  EXPECT_EQ(got.pp, 1);
  EXPECT_EQ(got.dp, c.dp);
  EXPECT_EQ(got.cp, c.cp);
  EXPECT_EQ(got.ep, 1);
  EXPECT_EQ(got.zero_stage, c.zero_stage == 1 ? 2 : c.zero_stage);
  if (c.zero_stage > 0) { EXPECT_EQ(got.shard_group(), c.shard_group()); }
  EXPECT_EQ(got.micro_batch_size, c.micro_batch_size);
  if (c.micro_batches() == 1) { EXPECT_EQ(got.global_batch_size, c.global_batch_size); }
  EXPECT_EQ(got.seq_len, c.seq_len);
  EXPECT_EQ(got.recompute, c.recompute == sim::Recompute::full ? sim::Recompute::full : sim::Recompute::none);
  EXPECT_FALSE(got.sequence_parallel);
  EXPECT_EQ(got.precision, c.uses_fp8() && c.fp8 != sim::Fp8Recipe::blockwise ? sim::Precision::bf16 : c.precision);
  EXPECT_EQ(got.fp8, c.fp8 == sim::Fp8Recipe::blockwise ? sim::Fp8Recipe::none : c.fp8);
  EXPECT_EQ(got.fp8_param_gather, c.fp8_param_gather && c.fp8 == sim::Fp8Recipe::tensorwise);
  EXPECT_EQ(got.offload_optimizer, c.offload_optimizer);
  EXPECT_EQ(got.cp_kind, c.cp_kind);
  EXPECT_FALSE(got.lora.enabled());
  sim::ParallelConfig checked = got;
  checked.sequence_parallel = c.sequence_parallel;  // not in the file: the caller says it, as for the attention
  EXPECT_NO_THROW(sim::validate_config(plan.model, plan.cluster, checked)) << yaml;
  // What the importer has to assume is said, never silent.
  EXPECT_TRUE(any_mentions(r.warnings, "gradient accumulation"));
}

}  // namespace shardplan::interop::accelerate_test
