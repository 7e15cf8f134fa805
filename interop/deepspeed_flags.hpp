#pragma once
// DeepSpeed ds_config keys: the one table the export (deepspeed_export.cpp), the import
// (deepspeed_import.cpp) and the Optimum-Habana DeepSpeed JSON use for the settings that carry the
// layout. Checked at deepspeedai/DeepSpeed edaa7221 (2026-08-22): deepspeed/runtime/constants.py and
// config.py (batch keys, steps_per_print — default None since f74ea69a, 2024-10, which silences the
// progress and throughput lines —, log_level, data_types), precision_config.py (bf16 alias
// "bfloat16", fp16), zero/config.py (DeepSpeedZeroConfig; overlap_comm defaults to true only at
// stage 3), activation_checkpointing/config.py, tensor_parallel/config.py (TPTrainingConfig),
// config.py get_pipeline_config.
#include <string_view>

namespace shardplan::interop::deepspeed_keys {

// Batch: any two determine the third; train = micro x accumulation x dp.
inline constexpr std::string_view train_batch = "train_batch_size";
inline constexpr std::string_view micro_batch = "train_micro_batch_size_per_gpu";
inline constexpr std::string_view accumulation = "gradient_accumulation_steps";
inline constexpr std::string_view gradient_clipping = "gradient_clipping";
inline constexpr std::string_view steps_per_print = "steps_per_print";
inline constexpr std::string_view log_level = "log_level";  // "info" shows the throughput lines (runs import)
inline constexpr std::string_view wall_clock_breakdown = "wall_clock_breakdown";

// Precision.
inline constexpr std::string_view bf16 = "bf16";
inline constexpr std::string_view bf16_alias = "bfloat16";
inline constexpr std::string_view fp16 = "fp16";
inline constexpr std::string_view enabled = "enabled";
inline constexpr std::string_view data_types = "data_types";
inline constexpr std::string_view grad_accum_dtype = "grad_accum_dtype";  // "fp32": BF16_Optimizer's fp32 accumulation

// ZeRO.
inline constexpr std::string_view zero = "zero_optimization";
inline constexpr std::string_view stage = "stage";
inline constexpr std::string_view offload_optimizer = "offload_optimizer";
inline constexpr std::string_view offload_param = "offload_param";
inline constexpr std::string_view device = "device";                    // "none" | "cpu" | "nvme"
inline constexpr std::string_view mics_shard_size = "mics_shard_size";  // -1: off; ZeRO-3 only
inline constexpr std::string_view overlap_comm = "overlap_comm";
inline constexpr std::string_view contiguous_gradients = "contiguous_gradients";
inline constexpr std::string_view reduce_bucket_size = "reduce_bucket_size";
inline constexpr std::string_view prefetch_bucket_size = "stage3_prefetch_bucket_size";
inline constexpr std::string_view param_persistence_threshold = "stage3_param_persistence_threshold";
inline constexpr std::string_view max_live_parameters = "stage3_max_live_parameters";
inline constexpr std::string_view max_reuse_distance = "stage3_max_reuse_distance";
inline constexpr std::string_view gather_16bit_on_save = "stage3_gather_16bit_weights_on_model_save";
inline constexpr std::string_view sub_group_size = "sub_group_size";

// Activation checkpointing (how deepspeed.checkpointing.checkpoint works; the model code chooses what).
inline constexpr std::string_view activation_checkpointing = "activation_checkpointing";
inline constexpr std::string_view partition_activations = "partition_activations";
inline constexpr std::string_view cpu_checkpointing = "cpu_checkpointing";

// Model parallelism.
inline constexpr std::string_view tensor_parallel = "tensor_parallel";
inline constexpr std::string_view autotp_size = "autotp_size";  // 0: off
inline constexpr std::string_view pipeline = "pipeline";
inline constexpr std::string_view stages = "stages";  // informational: PipelineModule(num_stages=...) decides

}  // namespace shardplan::interop::deepspeed_keys
