#pragma once
// Imports: a ParallelConfig from another stack's settings — a DeepSpeed ds_config, SageMaker model
// parallel parameters, Megatron-LM arguments, a torchtitan job config, an Accelerate config, a
// NeuronX Distributed or Optimum-Habana launch — so `shardplan simulate --import` can predict an
// existing job and `shardplan plan --from` search around it. The per-format declarations beyond
// DeepSpeed, SMP v1 and Megatron are in smp_v2.hpp, torchtitan.hpp, accelerate.hpp, neuron.hpp and
// habana.hpp.
//
// Neither format carries everything: the cluster size, sequence length and (for SMP) the batch
// size come from the ImportContext. Errors are InputError naming `source` and the field.
// Settings that do not matter to the cost model (optimizer, scheduler, bucket sizes, ...) are
// accepted silently; unknown or unsupported ones are ignored and reported in `warnings`.
// The result is not validated against a model (call simulator::validate_config for that).
// Neither format names the attention kernel (it lives in the model code): config.attention keeps
// the default, flash; `shardplan simulate --import ... --attention eager` overrides it.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "simulator/parallel_config.hpp"

namespace shardplan::interop {

struct ImportContext {
  int devices = 0;           // devices in the cluster (> 0): dp = devices / (tp x pp)
  int devices_per_node = 0;  // 0 = unknown; else a warning when a tp group spans nodes
  int seq_len = 2048;
  // 0 = from the file (DeepSpeed: tensor_parallel.autotp_size / pipeline.stages, else 1; SMP:
  // tensor_parallel_degree / partitions); non-zero must agree with the file.
  int tp = 0;
  int pp = 0;
  // Micro-batch size per device: fills a DeepSpeed "auto" train_micro_batch_size_per_gpu and is
  // SMP's only source of it (SMP parameters have no batch size; 1 with a warning when 0).
  // When the file has a number, a non-zero value here must agree with it.
  int micro_batch_size = 0;
  // Sequences per step, for formats without one (an Accelerate config: the script's gradient
  // accumulation); 0 = micro-batch x dp (no accumulation), with a warning.
  int global_batch_size = 0;
  // Fills DeepSpeed "auto" bf16/fp16 settings (HF Trainer's --bf16/--fp16) and is used when SMP
  // parameters enable neither fp16 nor bf16.
  std::optional<simulator::Precision> precision;
};

struct ImportResult {
  simulator::ParallelConfig config;
  std::vector<std::string> warnings;  // one line each: ignored/unsupported keys, assumed defaults
  // The framework the file belongs to (a frameworks/registry.hpp name; import_config_file sets
  // it, "" for SageMaker model parallel v1, which no framework model covers).
  std::string framework;
};

// DeepSpeed ds_config (JSON object). Reads zero_optimization.{stage, offload_optimizer.device,
// mics_shard_size}, bf16/fp16 (.enabled), activation_checkpointing (-> recompute full;
// cpu_checkpointing -> offload_activations), train_micro_batch_size_per_gpu,
// gradient_accumulation_steps, train_batch_size (any two determine the third, as in DeepSpeed;
// all three must satisfy train_batch_size = micro x accumulation x dp), tensor_parallel.autotp_size
// and pipeline.stages.
// "auto" (Hugging Face Trainer placeholders): train_batch_size and gradient_accumulation_steps
// are derived (accumulation defaults to 1, the Trainer's default, with a warning);
// train_micro_batch_size_per_gpu and bf16/fp16.enabled come from the context, else InputError
// naming the field and asking for a number (or true/false).
ImportResult import_deepspeed(const nlohmann::json& ds, const ImportContext& ctx, const std::string& source);

// SageMaker model parallel v1 parameters: the "parameters" object itself, or wrapped as
// {"smdistributed": {"modelparallel": {"enabled": true, "parameters": {...}}}} or
// {"modelparallel": {...}}. partitions (alias pipeline_parallel_degree) -> pp,
// tensor_parallel_degree -> tp, microbatches, pipeline "interleaved" (1F1B) | "simple" (GPipe),
// sharded_data_parallel_degree > 1 -> ZeRO-3 with that sharding degree, shard_optimizer_state ->
// ZeRO-1, offload_activations (-> also recompute full: SMP offloads checkpointed activations),
// bf16/fp16, ddp.
ImportResult import_smp(const nlohmann::json& params, const ImportContext& ctx, const std::string& source);

// Megatron-LM / Megatron-Core arguments: a pretrain_gpt.py command line or its launch script
// (megatron_flags.hpp). tp/pp/cp/ep/etp, --cp-comm-type p2p|a2a, sequence parallel, TP overlap,
// --use-tp-pp-dp-mapping (rank order), virtual stages (either flag), uneven first/last stages,
// the distributed optimizer (ZeRO-1; Megatron FSDP's strategies as ZeRO 0-3), optimizer
// instances (sharding degree), CPU offload, fp32 gradient reduction, batch sizes, --seq-length,
// recompute (full uniform 1 | full block N | selective), --bf16/--fp16, FP8 recipe and param
// gather, --attention-backend (unfused = eager). dp = devices / (tp x pp x cp); a torchrun
// --nnodes x --nproc-per-node in the script must equal the devices.
ImportResult import_megatron(std::string_view script, const ImportContext& ctx, const std::string& source);

// Imports whichever format the file is: .json — a DeepSpeed config (train_* batch keys or
// zero_optimization), SMP v2 settings (smp_v2.hpp: v2-only parameters or the example script's
// hyperparameters) or SMP v1 parameters; .toml — a torchtitan job config; .yaml/.yml — an
// Accelerate config; any other text — an Optimum-Habana command (gaudi_spawn.py / run_lora_clm.py /
// run_clm.py; the DeepSpeed JSON its --deepspeed names is read too), a NeuronX Distributed launch
// (--tensor_parallel_size, tp_zero1_llama, run_llama_nxd.py) or Megatron-LM arguments
// (--tensor-model-parallel-size, pretrain_gpt.py, --micro-batch-size). InputError otherwise.
ImportResult import_config_file(const std::string& path, const ImportContext& ctx);

}  // namespace shardplan::interop
