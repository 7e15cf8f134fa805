// Megatron-LM export (golden files) and import (megatron_import.cpp): the arguments the export
// writes read back to the plan's configuration; malformed and unknown flags are named.
#include <gtest/gtest.h>

#include "interop/config_import.hpp"
#include "interop/golden.hpp"
#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {
namespace megatron_interop_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

ImportContext context_of(const formats::Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  ctx.seq_len = 2048;  // the file's --seq-length must win
  return ctx;
}

ImportResult round_trip(const formats::Plan& p) {
  return import_megatron(megatron_command_line(p), context_of(p), "megatron_args.sh");
}

// Every setting the Megatron arguments express.
void expect_same_layout(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.cp, want.cp);
  if (want.cp > 1) EXPECT_EQ(got.cp_kind, want.cp_kind);
  EXPECT_EQ(got.ep, want.ep);
  EXPECT_EQ(got.expert_tp(), want.expert_tp());
  EXPECT_EQ(got.zero_stage, want.zero_stage == 2 ? 1 : want.zero_stage);  // ZeRO-2 is exported as the dist-opt
  EXPECT_EQ(got.shard_group(), want.shard_group());
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  EXPECT_EQ(got.seq_len, want.seq_len);
  EXPECT_EQ(got.schedule == sim::PipelineSchedule::interleaved, want.schedule == sim::PipelineSchedule::interleaved);
  EXPECT_EQ(got.virtual_stages, want.virtual_stages);
  EXPECT_EQ(got.partition, want.partition);
  EXPECT_EQ(got.recompute, want.recompute);
  EXPECT_EQ(got.recompute_num_layers, want.recompute_num_layers);
  EXPECT_EQ(got.sequence_parallel, want.sequence_parallel);
  EXPECT_EQ(got.tp_comm_overlap, want.tp_comm_overlap);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.fp8, want.fp8);
  EXPECT_EQ(got.fp8_param_gather, want.fp8_param_gather);
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.grad_accum_dtype, want.grad_accum_dtype);
  EXPECT_EQ(got.attention == sim::AttentionKind::eager, want.attention == sim::AttentionKind::eager);
  EXPECT_EQ(got.rank_order, want.rank_order);
}

TEST(MegatronInterop, GoldenArguments) {
  for (const char* name : {"dense-3d", "moe-cp"})
    expect_golden(name, "megatron_args.sh", megatron_command_line(golden_plan(name)));
}

TEST(MegatronInterop, ExportReadsBackToThePlansLayout) {
  for (const char* name : {"dense-3d", "moe-cp", "neuron-3d"}) {
    SCOPED_TRACE(name);
    const formats::Plan& p = golden_plan(name);
    const ImportResult r = round_trip(p);
    expect_same_layout(r.config, p.config);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  }
}

TEST(MegatronInterop, VariantsReadBackToo) {
  using Edit = void (*)(sim::ParallelConfig&);
  const Edit edits[] = {
      [](sim::ParallelConfig& c) {  // uneven first/last stages, no interleaving, block recompute
        c.schedule = sim::PipelineSchedule::one_f_one_b, c.virtual_stages = 1;
        c.partition = {18, 22, 22, 18};
        c.recompute = sim::Recompute::full, c.recompute_num_layers = 3;
      },
      [](sim::ParallelConfig& c) {  // FP8 with param gather, offloaded optimizer, partial sharding
        c.fp8 = sim::Fp8Recipe::tensorwise, c.fp8_param_gather = true;
        c.offload_optimizer = true, c.tp_comm_overlap = true;
        c.rank_order = "tp-pp-dp";
      },
      [](sim::ParallelConfig& c) {  // fp32 gradient reduction, eager attention, fp16
        c.grad_accum_dtype = sim::GradAccumDtype::fp32, c.attention = sim::AttentionKind::eager;
        c.precision = sim::Precision::fp16, c.recompute = sim::Recompute::full;
      },
  };
  for (const Edit edit : edits) {
    formats::Plan p = golden_plan("dense-3d");
    edit(p.config);
    sim::validate_config(p.model, p.cluster, p.config);
    expect_same_layout(round_trip(p).config, p.config);
  }
  formats::Plan ulysses = golden_plan("moe-cp");
  ulysses.config.cp_kind = sim::CpKind::all_to_all;
  expect_same_layout(round_trip(ulysses).config, ulysses.config);
}

TEST(MegatronInterop, AHandWrittenLaunchScriptWithVariablesAndComments) {
  const std::string script = R"(#!/bin/bash
# Llama-3 8B on 2 nodes
GPUS_PER_NODE=8
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2   # TP within the node
    --pipeline-model-parallel-size 2
    --context-parallel-size 2 --cp-comm-type a2a
    --sequence-parallel
)
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes 2 pretrain_gpt.py \
    ${MODEL_PARALLEL_ARGS[@]} --use-distributed-optimizer --num-distributed-optimizer-instances 2 \
    --micro-batch-size=2 --global-batch-size 128 --seq-length 8192 --bf16 \
    --recompute-activations --lr 3e-4 --lr-decay-style cosine --fancy-new-knob 3
)";
  ImportContext ctx;
  ctx.devices = 16;
  const ImportResult r = import_megatron(script, ctx, "train.sh");
  EXPECT_EQ(r.config.tp, 2);
  EXPECT_EQ(r.config.pp, 2);
  EXPECT_EQ(r.config.cp, 2);
  EXPECT_EQ(r.config.cp_kind, sim::CpKind::all_to_all);
  EXPECT_EQ(r.config.dp, 2);
  EXPECT_EQ(r.config.zero_stage, 1);
  EXPECT_EQ(r.config.shard_group(), 1);
  EXPECT_EQ(r.config.micro_batch_size, 2);
  EXPECT_EQ(r.config.global_batch_size, 128);
  EXPECT_EQ(r.config.seq_len, 8192);
  EXPECT_EQ(r.config.recompute, sim::Recompute::selective);
  EXPECT_EQ(r.config.precision, sim::Precision::bf16);
  ASSERT_EQ(r.warnings.size(), 1u);  // the optimizer / lr flags are silent; the unknown knob is not
  EXPECT_NE(r.warnings[0].find("--fancy-new-knob"), std::string::npos) << r.warnings[0];
}

std::string error_of(const std::string& script, int devices = 8) {
  ImportContext ctx;
  ctx.devices = devices;
  try {
    import_megatron(script, ctx, "bad.sh");
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

TEST(MegatronInterop, MalformedArgumentsAreNamed) {
  EXPECT_NE(
      error_of("--tensor-model-parallel-size two").find("bad.sh: --tensor-model-parallel-size: expected an integer"),
      std::string::npos);
  EXPECT_NE(error_of("--tensor-model-parallel-size 3").find("expected a divisor of the 8 devices"), std::string::npos);
  EXPECT_NE(error_of("--tensor-model-parallel-size 2 --cp-comm-type allgather").find("--cp-comm-type"),
            std::string::npos);
  EXPECT_NE(error_of("--micro-batch-size 3 --global-batch-size 10").find("--global-batch-size: expected a multiple"),
            std::string::npos);
  EXPECT_NE(error_of("torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --micro-batch-size 1").find("16"),
            std::string::npos);
  EXPECT_NE(error_of("--micro-batch-size 1 --bf16 --fp16").find("one of --bf16 and --fp16"), std::string::npos);
  EXPECT_NE(error_of("--micro-batch-size 1 --recompute-granularity full --recompute-method uniform "
                     "--recompute-num-layers 4")
                .find("--recompute-num-layers"),
            std::string::npos);
  EXPECT_NE(error_of("--micro-batch-size 1 --seq-length").find("--seq-length: expected a value"), std::string::npos);
  EXPECT_NE(error_of("--micro-batch-size 1 --seq-length '4096").find("unterminated single quote"), std::string::npos);
  EXPECT_NE(error_of("echo hello").find("no Megatron-LM arguments"), std::string::npos);
}

}  // namespace megatron_interop_test
}  // namespace shardplan::interop
