// NeuronX Distributed: the torchrun line of the NxD Llama examples (golden file, refusals, a run
// against a fake torchrun with hostile model names), its import back (round trips), and imports
// of the shipped launchers' shell-variable form and of malformed lines.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "interop/golden.hpp"
#include "interop/neuron.hpp"
#include "interop/script_support.hpp"
#include "simulator/errors.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace neuron_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using formats::Plan;
using formats::shell_quote;
using shardplan::testing::input_error_of;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

// --- helpers ---------------------------------------------------------------------------------

// Llama 2 70B on trn1.32xlarge counted in NeuronCores, edited from the neuron-3d layout.
Plan trn_plan(int nodes, const std::function<void(sim::ParallelConfig&)>& edit,
              const char* hw = "trn1.32xlarge-neuroncore") {
  sim::ParallelConfig c;
  c.tp = 8, c.pp = 1, c.dp = nodes * 32 / 8, c.zero_stage = 1;
  c.micro_batch_size = 1, c.global_batch_size = 1024, c.seq_len = 4096;
  c.sequence_parallel = true, c.recompute = sim::Recompute::full, c.attention = sim::AttentionKind::eager;
  edit(c);
  return shardplan::testing::plan_of("llama2-70b", hw, nodes, c);
}

ImportContext context_for(const Plan& plan) {
  ImportContext ctx;
  ctx.devices = plan.cluster.devices();
  ctx.devices_per_node = plan.cluster.per_node();
  ctx.seq_len = 2048;  // the line carries its own
  return ctx;
}

// Every field of the configuration the NxD line expresses.
void expect_same_config(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.cp, want.cp);
  if (want.cp > 1) { EXPECT_EQ(got.cp_kind, want.cp_kind); }
  EXPECT_EQ(got.ep, want.ep);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.shard_group(), want.shard_group());
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  EXPECT_EQ(got.seq_len, want.seq_len);
  EXPECT_EQ(got.schedule, want.schedule);
  EXPECT_EQ(got.virtual_stages, want.virtual_stages);
  EXPECT_EQ(got.recompute, want.recompute);
  EXPECT_EQ(got.recompute_num_layers, want.recompute_num_layers);
  EXPECT_EQ(got.sequence_parallel, want.sequence_parallel);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.mixed_precision, want.mixed_precision);
  EXPECT_EQ(got.grad_accum_dtype, want.grad_accum_dtype);
  EXPECT_EQ(got.attention, want.attention);
  EXPECT_EQ(got.fp8, want.fp8);
  EXPECT_EQ(got.lora.rank, want.lora.rank);
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.offload_activations, want.offload_activations);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

std::string arg_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "<absent>" : *(it + 1);
}

// --- export ----------------------------------------------------------------------------------

TEST(NeuronExport, GoldenNeuron3d) {
  expect_golden("neuron-3d", "neuron_launch.sh", neuron_command_line(golden_plan("neuron-3d")));
}

TEST(NeuronExport, PipelineLineHasTheTpPpScriptsNames) {
  const std::string s = neuron_command_line(golden_plan("neuron-3d"));
  for (const char* want :
       {"torchrun --nproc_per_node 32 --nnodes 32 --node_rank \"$NODE_RANK\" --master_addr "
        "\"$MASTER_ADDR\" --master_port 44000 run_llama_nxd.py",
        "--train_batch_size 64", "--num_microbatches 64", "--tensor_parallel_size 8", "--pipeline_parallel_size 8",
        "--virtual_pipeline_size 1", "--use_zero1_optimizer 1", "--use_sequence_parallel 1",
        "--use_selective_checkpoint 0", "--use_flash_attention 0", "--use_gpu_compatible_precision 0",
        "--training_config 70B_config_llama2", "export XLA_DOWNCAST_BF16=1"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_EQ(s.find("--use_zero_1"), std::string::npos);  // the other script's spelling
}

TEST(NeuronExport, Zero1ScriptForOnePipelineStage) {
  const Plan plan = trn_plan(1, [](sim::ParallelConfig& c) {
    c.micro_batch_size = 2, c.global_batch_size = 64, c.recompute = sim::Recompute::selective;
    c.attention = sim::AttentionKind::flash, c.grad_accum_dtype = sim::GradAccumDtype::fp32;
  });
  const std::string s = neuron_command_line(plan);
  for (const char* want :
       {"torchrun --nproc_per_node 32 tp_zero1_llama_hf_pretrain.py", "--batch_size 2", "--grad_accum_usteps 8",
        "--tensor_parallel_size 8", "--use_zero_1", "--use_mix_precision", "--sequence_parallel_enabled",
        "--selective_checkpoint_enabled", "--seq_len 4096", "--use_gpu_compatible_precision 1",
        "--use_flash_attention 1", "--steps_this_run -1", "--model_path ../tp_pp_llama_hf_pretrain/70B_config_llama2",
        "export NEURON_RT_NUM_CORES=32"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_EQ(s.find("--nnodes"), std::string::npos);
  EXPECT_EQ(s.find("--pipeline_parallel_size"), std::string::npos);
  EXPECT_EQ(s.find("XLA_DOWNCAST_BF16"), std::string::npos);  // the script sets it itself
}

TEST(NeuronExport, NotesForWhatNxdCannotExpress) {
  const Plan plan = trn_plan(2, [](sim::ParallelConfig& c) {
    c.pp = 2, c.dp = 4, c.recompute = sim::Recompute::none, c.schedule = sim::PipelineSchedule::gpipe;
    c.sharding_degree = 2, c.rank_order = "tp-pp-dp";
  });
  const std::string notes = joined(neuron_notes(plan));
  for (const char* want :
       {"always checkpoint", "GPipe", "sharding degree of 2", "rank order 'tp-pp-dp'", "70B_config_llama2"})
    EXPECT_NE(notes.find(want), std::string::npos) << want << "\n" << notes;
  const std::string s = neuron_command_line(plan);
  EXPECT_EQ(s.rfind("# shardplan note: ", 0), 0u);
  EXPECT_NE(s.find("--use_selective_checkpoint 1"), std::string::npos);  // none -> the least NxD does
}

TEST(NeuronExport, RefusesPlansNxdCannotRun) {
  for (const char* name : {"dense-3d", "zero3-lora", "moe-cp"}) {
    const std::string why = input_error_of([&] { (void)neuron_command_line(golden_plan(name)); });
    EXPECT_NE(why.find("is not AWS Trainium"), std::string::npos) << name << ": " << why;
  }
  const auto refused = [](const Plan& p, const char* text) {
    const std::string why = input_error_of([&] { (void)neuron_command_line(p); });
    EXPECT_NE(why.find(text), std::string::npos) << why;
  };
  // Chips, not NeuronCores: 16 per node.
  sim::ParallelConfig chips;
  chips.tp = 8, chips.dp = 2, chips.zero_stage = 1, chips.global_batch_size = 16, chips.seq_len = 4096;
  refused(shardplan::testing::plan_of("llama2-70b", "trn1.32xlarge", 1, chips), "re-plan on trn1.32xlarge-neuroncore");
  refused(trn_plan(1, [](sim::ParallelConfig& c) { c.zero_stage = 2; }), "ZeRO-2");
  refused(trn_plan(1, [](sim::ParallelConfig& c) { c.zero_stage = 3; }), "ZeRO-3");
  refused(trn_plan(1, [](sim::ParallelConfig& c) { c.lora.rank = 8, c.lora.targets = {"q_proj"}; }), "LoRA");
  refused(trn_plan(1, [](sim::ParallelConfig& c) { c.offload_optimizer = true; }), "offload");
  refused(trn_plan(1, [](sim::ParallelConfig& c) { c.precision = sim::Precision::fp32, c.zero_stage = 0; }),
          "precision fp32");
  refused(trn_plan(1,
                   [](sim::ParallelConfig& c) {
                     c.tp = 4, c.cp = 2, c.dp = 4, c.cp_kind = sim::CpKind::all_to_all,
                     c.attention = sim::AttentionKind::flash;
                   }),
          "--cp-kind ring");
  Plan fp8 = trn_plan(1, [](sim::ParallelConfig&) {});
  fp8.config.fp8 = sim::Fp8Recipe::delayed;  // no valid FP8 plan exists on trn1: set after validation
  refused(fp8, "FP8");
  Plan moe = fp8;
  moe.config.fp8 = sim::Fp8Recipe::none;
  moe.config.ep = 2;
  refused(moe, "no experts");
}

// --- round trips -----------------------------------------------------------------------------

void expect_round_trip(const Plan& plan) {
  const std::string line = neuron_command_line(plan);
  const ImportResult r = import_neuron(line, context_for(plan), "neuron_launch.sh");
  expect_same_config(r.config, plan.config);
  EXPECT_TRUE(r.warnings.empty()) << joined(r.warnings) << line;
}

TEST(NeuronRoundTrip, GoldenPlan) { expect_round_trip(golden_plan("neuron-3d")); }

TEST(NeuronRoundTrip, EditedVariants) {
  expect_round_trip(trn_plan(2, [](sim::ParallelConfig&) {}));  // tp_zero1, 2 nodes
  expect_round_trip(trn_plan(1, [](sim::ParallelConfig& c) {
    c.zero_stage = 0, c.sequence_parallel = false, c.micro_batch_size = 4, c.global_batch_size = 32;
    c.recompute = sim::Recompute::selective, c.attention = sim::AttentionKind::flash;
  }));
  expect_round_trip(trn_plan(1, [](sim::ParallelConfig& c) { c.grad_accum_dtype = sim::GradAccumDtype::fp32; }));
  expect_round_trip(trn_plan(4, [](sim::ParallelConfig& c) {  // interleaved 1F1B
    c.pp = 4, c.dp = 4, c.schedule = sim::PipelineSchedule::interleaved, c.virtual_stages = 2;
    c.micro_batch_size = 2, c.global_batch_size = 256, c.seq_len = 2048, c.recompute = sim::Recompute::selective;
  }));
  expect_round_trip(trn_plan(2, [](sim::ParallelConfig& c) {  // ring context parallelism
    c.cp = 2, c.dp = 4, c.attention = sim::AttentionKind::flash, c.global_batch_size = 64;
  }));
  expect_round_trip(trn_plan(2, [](sim::ParallelConfig& c) {
    c.pp = 2, c.dp = 4, c.cp = 2, c.tp = 4, c.attention = sim::AttentionKind::flash, c.zero_stage = 0;
    c.sequence_parallel = false, c.global_batch_size = 32;
  }));
}

// --- the shipped launchers (abridged: echo lines, log handling and the OMPI branch's details
// dropped; every assignment, test and the torchrun line as at fecfe75) ------------------------

const char* const kZero1Launcher = R"SH(#!/bin/bash
export NEURON_CC_FLAGS="--model-type transformer --cache_dir=$HOME/neuron_compile_cache/"
MODEL_SIZE="7B"
LLAMA_VERSION='2'
# TP degree
TP_DEGREE=8
# 0: bf16; 1: mixed precision
USE_MIX_PRECISION=1
# 0: use pure DP; 1: use ZeRO-1
USE_ZERO_1=1
# global batch size
: ${GBS:=1024}
# micro batch size
MBS=1
TOTAL_STEPS=10000
WARMUP_STEPS=100
LR=3.0e-4
MODEL_PATH=$SCRIPT_DIR/${MODEL_SIZE}_config_llama${LLAMA_VERSION}
DATA_PATH="$HOME/examples_datasets/wikicorpus_llama2_tokenized_4k"
SEQ_LEN=4096
export NUM_NEURONCORES=32
NODE_ID=0
WORLD_SIZE=1
DISTRIBUTED_ARGS="--nproc_per_node $NUM_NEURONCORES"
METRICS_FILE="results.json"
if [ ! -z "$SLURM_NTASKS" ]; then
    WORLD_SIZE=$SLURM_NTASKS
    NODE_ID=$SLURM_NODEID
    MASTER_ADDRESS=(`scontrol show hostnames $SLURM_JOB_NODELIST`)
    DISTRIBUTED_ARGS="--nproc_per_node $NUM_NEURONCORES --nnodes $WORLD_SIZE --node_rank $NODE_ID --master_addr $MASTER_ADDRESS --master_port 44000"
    if [ $NEURON_EXTRACT_GRAPHS_ONLY -gt 0 ]; then
    STEPS_THIS_RUN=2
    elif [ -v PERF_TEST ] && [ $PERF_TEST -gt 0 ]; then
        STEPS_THIS_RUN=100
    else
        STEPS_THIS_RUN=-1
    fi
elif [ -v OMPI_COMM_WORLD_RANK ]; then
    WORLD_SIZE=$OMPI_COMM_WORLD_SIZE
    NODELIST=$(/root/nodelist_helper.py)
    HOSTS=(${NODELIST//\ / })
    MASTER_ADDRESS=${HOSTS[0]}
    DISTRIBUTED_ARGS="--nproc_per_node $NUM_NEURONCORES --nnodes $WORLD_SIZE --node_rank $NODE_ID --master_addr $MASTER_ADDRESS --master_port 44000"
fi
export NEURON_RT_NUM_CORES=32
export NUM_NEURONCORES=$NEURON_RT_NUM_CORES
EXTRA_ARGS=" "
if [ $USE_MIX_PRECISION -gt 0 ]; then
    EXTRA_ARGS+=" --use_mix_precision"
fi
if [ $USE_ZERO_1 -gt 0 ]; then
    EXTRA_ARGS+=" --use_zero_1"
fi
DP=$(($NEURON_RT_NUM_CORES * $WORLD_SIZE / $TP_DEGREE))
ACC_STEPS=$(($GBS / $MBS / $DP))
echo TP_DEGREE=$TP_DEGREE
torchrun $DISTRIBUTED_ARGS \
    tp_zero1_llama_hf_pretrain.py \
    --metrics_file $METRICS_FILE \
    --model_path $MODEL_PATH \
    --data_dir $DATA_PATH \
    --tensor_parallel_size $TP_DEGREE \
    --batch_size $MBS \
    --steps_this_run $STEPS_THIS_RUN\
    --max_steps $TOTAL_STEPS \
    --warmup_steps $WARMUP_STEPS \
    --lr $LR \
    --grad_accum_usteps $ACC_STEPS \
    --seq_len $SEQ_LEN \
    --sequence_parallel_enabled \
    --selective_checkpoint_enabled \
    --logging_interval 10 \
    $EXTRA_ARGS |& tee $OUTPUT_LOG
exit ${PIPESTATUS[0]}
)SH";

const char* const kPipelineLauncher = R"SH(#!/bin/bash
set -e
if [[ ${SLURM_NODEID-0} == 0 ]]; then
    set -x
fi
MODEL_SIZE="70B"
LLAMA_VERSION='2'
export XLA_DOWNCAST_BF16=1
PROCESSES_PER_NODE=32
WORLD_SIZE=1
NODEID=0
if [ -v SLURM_NTASKS ]; then
    IPS=""
    for h in $(scontrol show hostname); do
        IPS="$IPS $(nslookup $h  | awk '/^Address: / { print $2 }')";
    done
    HOSTS=(${IPS//\ / })
    NODEID=$SLURM_NODEID
    NTASKS=$SLURM_NTASKS
    WORLD_SIZE=$SLURM_NTASKS
    MASTER_ADDR=${HOSTS[0]}
    MASTER_PORT=44000
    DISTRIBUTED_ARGS="--nproc_per_node $PROCESSES_PER_NODE --nnodes $NTASKS --node_rank $NODEID --master_addr $MASTER_ADDR --master_port $MASTER_PORT"
elif [ -v OMPI_COMM_WORLD_RANK ]; then
    WORLD_SIZE=$OMPI_COMM_WORLD_SIZE
    NTASKS=$OMPI_COMM_WORLD_SIZE
    DISTRIBUTED_ARGS="--nproc_per_node $PROCESSES_PER_NODE --nnodes $NTASKS --node_rank $NODEID --master_addr $MASTER_ADDR --master_port $MASTER_PORT"
else
    DISTRIBUTED_ARGS="--nproc_per_node $PROCESSES_PER_NODE"
    LOG_PATH=logs
fi
# Global batch size
: ${GBS:=1024}
SEQ_LEN=4096
: ${PP_DEGREE:=8}
: ${VPP_DEGREE:=1}
TP_DEGREE=32
DP=$(($PROCESSES_PER_NODE * $WORLD_SIZE / $TP_DEGREE / $PP_DEGREE))
BS=$(($GBS / $DP))
NUM_MICROBATCHES=$BS
: ${GPU_COMPATIBLE_PRECISION:=1}
if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then
    max_steps=10
elif [ -v PERF_TEST ] && [ $PERF_TEST -gt 0 ]; then
    max_steps=100
else
    max_steps=30000
fi
torchrun $DISTRIBUTED_ARGS run_llama_nxd.py \
    --metrics_file $METRICS_FILE \
    --train_batch_size $BS \
    --use_meta_device_init 1 \
    --training_dir $DATA_PATH \
    --training_config $SCRIPT_DIR/${MODEL_SIZE}_config_llama${LLAMA_VERSION} \
    --max_steps $max_steps \
    --seq_len $SEQ_LEN \
    --pipeline_parallel_size $PP_DEGREE \
    --virtual_pipeline_size $VPP_DEGREE \
    --tensor_parallel_size $TP_DEGREE \
    --num_microbatches $NUM_MICROBATCHES \
    --lr 0.00015 \
    --use_zero1_optimizer 1 \
    --use_selective_checkpoint 1 \
    --qkv_linear 1 \
    --kv_replicator 4 \
    --use_gpu_compatible_precision $GPU_COMPATIBLE_PRECISION \
    --tb_dir $tb_dir |& tee $LOG_PATH/log
exit ${PIPESTATUS[0]}
)SH";

ImportContext cores(int nodes) {
  ImportContext ctx;
  ctx.devices = 32 * nodes;
  ctx.devices_per_node = 32;
  return ctx;
}

TEST(NeuronImport, ShippedTpZero1LauncherThroughItsVariables) {
  for (const int nodes : {1, 2}) {
    const ImportResult r = import_neuron(kZero1Launcher, cores(nodes), "tp_zero1_llama2_7B_hf_pretrain.sh");
    const auto& c = r.config;
    EXPECT_EQ(c.tp, 8);
    EXPECT_EQ(c.pp, 1);
    EXPECT_EQ(c.dp, 4 * nodes);
    EXPECT_EQ(c.micro_batch_size, 1);
    EXPECT_EQ(c.global_batch_size, 1024);  // ACC_STEPS = GBS / MBS / DP with the cluster's DP
    EXPECT_EQ(c.seq_len, 4096);
    EXPECT_EQ(c.zero_stage, 1);  // EXTRA_ARGS+=" --use_zero_1" under USE_ZERO_1=1
    EXPECT_TRUE(c.sequence_parallel);
    EXPECT_EQ(c.recompute, sim::Recompute::selective);
    EXPECT_EQ(c.attention, sim::AttentionKind::flash);  // --use_flash_attention defaults to 1 here
    EXPECT_EQ(c.grad_accum_dtype, sim::GradAccumDtype::fp32);
    EXPECT_TRUE(r.warnings.empty()) << joined(r.warnings);
  }
  std::string no_zero = kZero1Launcher;
  no_zero.replace(no_zero.find("USE_ZERO_1=1"), 12, "USE_ZERO_1=0");
  const ImportResult r = import_neuron(no_zero, cores(1), "edited.sh");
  EXPECT_EQ(r.config.zero_stage, 0);
  EXPECT_EQ(r.config.grad_accum_dtype, sim::GradAccumDtype::param);
  EXPECT_NE(joined(r.warnings).find("ZeRO-1 optimizer is not enabled"), std::string::npos) << joined(r.warnings);
}

TEST(NeuronImport, ShippedTpPpLauncherThroughItsVariables) {
  const ImportResult r = import_neuron(kPipelineLauncher, cores(32), "run_llama2_70B_tp_pp.sh");
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 32);
  EXPECT_EQ(c.pp, 8);
  EXPECT_EQ(c.dp, 4);
  EXPECT_EQ(c.micro_batch_size, 1);  // BS / NUM_MICROBATCHES, both GBS / DP
  EXPECT_EQ(c.global_batch_size, 1024);
  EXPECT_EQ(c.seq_len, 4096);
  EXPECT_EQ(c.zero_stage, 1);
  EXPECT_TRUE(c.sequence_parallel);  // --use_sequence_parallel defaults to 1
  EXPECT_EQ(c.recompute, sim::Recompute::selective);
  EXPECT_EQ(c.attention, sim::AttentionKind::eager);  // --use_flash_attention defaults to 0 here
  EXPECT_EQ(c.schedule, sim::PipelineSchedule::one_f_one_b);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  ASSERT_EQ(r.warnings.size(), 1u) << joined(r.warnings);
  EXPECT_NE(r.warnings[0].find("--kv_replicator 4"), std::string::npos);
  // The environment's defaults are what `: ${PP_DEGREE:=8}` falls back to; an assignment overrides.
  std::string pp4 = kPipelineLauncher;
  pp4.replace(pp4.find(": ${PP_DEGREE:=8}"), 17, "PP_DEGREE=4");
  EXPECT_EQ(import_neuron(pp4, cores(32), "edited.sh").config.dp, 8);
  EXPECT_EQ(import_neuron(pp4, cores(32), "edited.sh").config.global_batch_size, 1024);
}

TEST(NeuronImport, WarnsOnFlagsThatMatterAndUnknownOnes) {
  const std::string line =
      "torchrun --nproc_per_node 32 tp_zero1_llama_hf_pretrain.py --tensor_parallel_size 8 "
      "--batch_size 1 --grad_accum_usteps 4 --seq_len 2048 --use_zero_1 --num_layers 4 "
      "--no_such_flag 3 --lr 1e-4";
  const ImportResult r = import_neuron(line, cores(1), "cmd");
  const std::string w = joined(r.warnings);
  EXPECT_NE(w.find("--num_layers 4 overrides"), std::string::npos) << w;
  EXPECT_NE(w.find("--no_such_flag is not a setting"), std::string::npos) << w;
  EXPECT_EQ(w.find("--lr"), std::string::npos) << w;
  EXPECT_EQ(r.config.global_batch_size, 16);
  // Defaults of the script, said so.
  const ImportResult d = import_neuron("run_llama_nxd.py --pipeline_parallel_size 2", cores(2), "cmd");
  EXPECT_EQ(d.config.tp, 8);
  EXPECT_EQ(d.config.micro_batch_size, 2);  // 16 / 8
  EXPECT_NE(joined(d.warnings).find("--train_batch_size not given: run_llama_nxd.py's default 16"), std::string::npos);
}

TEST(NeuronImport, MalformedLinesNameTheSourceAndFlag) {
  const auto error = [](const std::string& text, int nodes = 1) {
    return input_error_of([&] { (void)import_neuron(text, cores(nodes), "launch.sh"); });
  };
  const std::string pp = "torchrun run_llama_nxd.py --tensor_parallel_size 8 --pipeline_parallel_size 4 ";
  EXPECT_NE(error(pp + "--train_batch_size 10 --num_microbatches 3")
                .find("launch.sh: --train_batch_size: expected a "
                      "multiple of --num_microbatches (3)"),
            std::string::npos);
  EXPECT_NE(error(pp + "--train_batch_size x").find("launch.sh: --train_batch_size: expected an integer"),
            std::string::npos);
  EXPECT_NE(error(pp + "--train_batch_size $BS").find("launch.sh: --train_batch_size: '$BS' is not assigned"),
            std::string::npos);
  EXPECT_NE(error("torchrun run_llama_nxd.py --tensor_parallel_size 8 --pipeline_parallel_size 3")
                .find("launch.sh: --tensor_parallel_size x --pipeline_parallel_size x --context_parallel_size"),
            std::string::npos);
  EXPECT_NE(error("torchrun --nproc_per_node 32 --nnodes 2 run_llama_nxd.py --pipeline_parallel_size 2")
                .find("launch.sh: --nproc_per_node x --nnodes: expected the cluster's 32"),
            std::string::npos);
  EXPECT_NE(error("python train.py --lr 1").find("launch.sh: no tp_zero1_llama_hf_pretrain.py or run_llama_nxd.py"),
            std::string::npos);
  EXPECT_NE(error("torchrun run_llama_nxd.py --seq_len 'unterminated").find("launch.sh: unterminated single quote"),
            std::string::npos);
  ImportContext ctx = cores(1);
  ctx.tp = 4;
  EXPECT_NE(input_error_of([&] {
              (void)import_neuron(pp + "--train_batch_size 8", ctx, "launch.sh");
            }).find("launch.sh: --tensor_parallel_size: expected the tensor-parallel degree given to the import (4)"),
            std::string::npos);
}

// --- hostile model names -----------------------------------------------------------------------

TEST(NeuronExport, HostileModelNamesReachTorchrunVerbatim) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  fake_recorder(dir, "torchrun");
  for (const auto& name : hostile_strings(canary)) {
    SCOPED_TRACE(name);
    Plan plan = golden_plan("neuron-3d");
    plan.model.name = name;
    const std::string script = neuron_command_line(plan);
    const std::string path = dir.write("launch.sh", script);
    ASSERT_EQ(run_command("bash -n " + shell_quote(path)).status, 0) << script;
    const auto r =
        run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                    " DATA_PATH=/data NODE_RANK=3 MASTER_ADDR=10.0.0.1 bash " + shell_quote(path));
    ASSERT_EQ(r.status, 0) << r.out;
    const auto args = split_nul(read_text(dir.file("args")));
    EXPECT_EQ(arg_after(args, "--training_config"), name + "_config");
    EXPECT_EQ(arg_after(args, "--training_dir"), "/data");
    EXPECT_EQ(arg_after(args, "--node_rank"), "3");
  }
  EXPECT_FALSE(fs::exists(canary)) << "a quoted string was executed";
}

TEST(NeuronExport, ScriptStopsWithoutTheVariablesItNeeds) {
  TempDir dir;
  fake_recorder(dir, "torchrun");
  const std::string path = dir.write("launch.sh", neuron_command_line(golden_plan("neuron-3d")));
  const auto r =
      run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                  " DATA_PATH=/data bash " + shell_quote(path));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("NODE_RANK"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.file("args")));
}

}  // namespace neuron_test
}  // namespace shardplan::interop
