#pragma once
// Hugging Face Accelerate config (YAML) keys and `accelerate launch` flags: the one table both the
// export (accelerate_export.cpp) and the import (accelerate_import.cpp) use.
//
// Checked at huggingface/accelerate 16cb6eb80dd9aa8b4df1a63ef57863e455d53b83 (2026-07-24). Files
// and the commit that last touched each, line numbers at that tree:
//   CL  src/accelerate/commands/config/cluster.py      fea9e6b2 (what `accelerate config` writes)
//   CA  src/accelerate/commands/config/config_args.py  4826b66d (ClusterConfig: the top-level keys)
//   LA  src/accelerate/commands/launch.py              fea9e6b2 (flags; config file -> args)
//   UL  src/accelerate/utils/launch.py                 3bffed54 (args -> FSDP_* environment)
//   CO  src/accelerate/utils/constants.py              3bffed54 (value lists)
//   DC  src/accelerate/utils/dataclasses.py            04887aee (FullyShardedDataParallelPlugin,
//                                                                TERecipeKwargs, AORecipeKwargs)
//   PC  src/accelerate/parallelism_config.py           bd208073 (ParallelismConfig)
//   AC  src/accelerate/accelerator.py                  2278ebbf
// The layer classes are the `_no_split_modules` of Hugging Face transformers' modeling files
// (src/transformers/models/<model>/modeling_<model>.py; Qwen3MoeDecoderLayer read at
// modeling_qwen3_moe.py 16b6c53c, the others through the stored index of transformers sources).
#include <string_view>

namespace shardplan::interop::accelerate_flags {

// Top-level keys: the fields of ClusterConfig (CA:179-217) and BaseConfig (CA:76-81).
// from_yaml_file refuses any other top-level key (CA:154-159); to_yaml_file is yaml.safe_dump
// (sorted keys, None dropped).
inline constexpr std::string_view compute_environment = "compute_environment";  // LOCAL_MACHINE | AMAZON_SAGEMAKER
inline constexpr std::string_view distributed_type = "distributed_type";        // DistributedType, DC:625-638
inline constexpr std::string_view mixed_precision = "mixed_precision";          // no | fp16 | bf16 | fp8 (LA:190)
inline constexpr std::string_view num_processes = "num_processes";              // TOTAL over machines (LA:198)
inline constexpr std::string_view num_machines = "num_machines";                // LA:201
inline constexpr std::string_view machine_rank = "machine_rank";                // LA:292
inline constexpr std::string_view main_process_ip = "main_process_ip";          // LA:295
inline constexpr std::string_view main_process_port = "main_process_port";      // LA:298
inline constexpr std::string_view rdzv_backend = "rdzv_backend";                // static | c10d (LA:327)
inline constexpr std::string_view same_network = "same_network";                // LA:286
inline constexpr std::string_view main_training_function = "main_training_function";
inline constexpr std::string_view use_cpu = "use_cpu";
inline constexpr std::string_view fsdp_config = "fsdp_config";
inline constexpr std::string_view parallelism_config = "parallelism_config";
inline constexpr std::string_view fp8_config = "fp8_config";
inline constexpr std::string_view deepspeed_config = "deepspeed_config";
inline constexpr std::string_view megatron_lm_config = "megatron_lm_config";
// Top-level keys that do not change the layout or the cost (accepted silently by the import).
inline constexpr std::string_view silent_top_level[] = {
    "machine_rank",           "main_process_ip", "main_process_port",   "rdzv_backend", "same_network", "gpu_ids",
    "main_training_function", "downcast_bf16",   "enable_cpu_affinity", "debug",        "tpu_name",     "tpu_zone",
    "tpu_use_cluster",        "tpu_use_sudo",    "command_file",        "commands",     "tpu_vm",       "tpu_env",
    "dynamo_config",          "mpirun_config"};

// Values written and read.
inline constexpr std::string_view local_machine = "LOCAL_MACHINE";  // ComputeEnvironment (DC)
inline constexpr std::string_view sagemaker = "AMAZON_SAGEMAKER";
inline constexpr std::string_view type_fsdp = "FSDP";             // DC:634
inline constexpr std::string_view type_deepspeed = "DEEPSPEED";   // DC:633
inline constexpr std::string_view type_megatron = "MEGATRON_LM";  // DC:636
inline constexpr std::string_view type_no = "NO";                 // DC:625 (one process)
// Plain data parallelism (DDP) on one device kind each (DC:626-638): LA:1224-1236 launches all but
// MULTI_CPU as --multi_gpu; MULTI_CPU is DDP over CPU processes.
inline constexpr std::string_view multi_device_types[] = {"MULTI_GPU",  "MULTI_NPU",    "MULTI_MLU",
                                                          "MULTI_SDAA", "MULTI_MUSA",   "MULTI_XPU",
                                                          "MULTI_HPU",  "MULTI_NEURON", "MULTI_CPU"};
inline constexpr std::string_view precision_no = "no";
inline constexpr std::string_view precision_fp16 = "fp16";
inline constexpr std::string_view precision_bf16 = "bf16";
inline constexpr std::string_view precision_fp8 = "fp8";
inline constexpr std::string_view rdzv_static = "static";

// fsdp_config keys (CL:399-508 write them; LA:514-605 are the matching flags). LA:1264-1265 maps a
// key without the prefix to fsdp_<key>, so the import accepts both spellings.
inline constexpr std::string_view fsdp_prefix = "fsdp_";
inline constexpr std::string_view fsdp_version = "fsdp_version";  // 1 | 2 (CL:400; LA:514 default "1")
// FSDP1: a sharding-strategy name; FSDP2: a bool (DC:1857-1875). CL:410/416 write it in place of
// fsdp_sharding_strategy.
inline constexpr std::string_view fsdp_reshard_after_forward = "fsdp_reshard_after_forward";
// Deprecated but still read (LA:534, default "FULL_SHARD"): UL:313 always exports it as
// FSDP_SHARDING_STRATEGY, the FSDP1 plugin takes it from there (DC:1836-1845) and AC:1940 prefers it
// to reshard_after_forward, so under FSDP1 it is the strategy that runs.
inline constexpr std::string_view fsdp_sharding_strategy = "fsdp_sharding_strategy";
inline constexpr std::string_view fsdp_offload_params =
    "fsdp_offload_params";  // params + grads + optimizer step on CPU
inline constexpr std::string_view fsdp_auto_wrap_policy = "fsdp_auto_wrap_policy";
inline constexpr std::string_view fsdp_transformer_layer_cls_to_wrap = "fsdp_transformer_layer_cls_to_wrap";
inline constexpr std::string_view fsdp_min_num_params = "fsdp_min_num_params";
inline constexpr std::string_view fsdp_backward_prefetch = "fsdp_backward_prefetch";  // FSDP1 only (CL:456-462)
inline constexpr std::string_view fsdp_forward_prefetch = "fsdp_forward_prefetch";    // FSDP1 only
inline constexpr std::string_view fsdp_state_dict_type = "fsdp_state_dict_type";
inline constexpr std::string_view fsdp_use_orig_params = "fsdp_use_orig_params";  // FSDP1 only
inline constexpr std::string_view fsdp_cpu_ram_efficient_loading = "fsdp_cpu_ram_efficient_loading";
inline constexpr std::string_view fsdp_sync_module_states = "fsdp_sync_module_states";  // FSDP1 only
inline constexpr std::string_view fsdp_activation_checkpointing = "fsdp_activation_checkpointing";
inline constexpr std::string_view fsdp_ignored_modules = "fsdp_ignored_modules";

// Sharding strategies, in ShardingStrategy order: the name at index i is ShardingStrategy(i + 1),
// and a number 1..5 is accepted as that strategy (CO:38; DC:1840-1845).
inline constexpr std::string_view sharding_strategies[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                                           "HYBRID_SHARD_ZERO2"};
inline constexpr std::string_view full_shard = "FULL_SHARD";
inline constexpr std::string_view shard_grad_op = "SHARD_GRAD_OP";
inline constexpr std::string_view no_shard = "NO_SHARD";
inline constexpr std::string_view hybrid_shard = "HYBRID_SHARD";
inline constexpr std::string_view hybrid_shard_zero2 = "HYBRID_SHARD_ZERO2";
// CO:39-42.
inline constexpr std::string_view transformer_based_wrap = "TRANSFORMER_BASED_WRAP";
inline constexpr std::string_view size_based_wrap = "SIZE_BASED_WRAP";
inline constexpr std::string_view no_wrap = "NO_WRAP";
inline constexpr std::string_view backward_pre = "BACKWARD_PRE";
inline constexpr std::string_view no_prefetch = "NO_PREFETCH";
inline constexpr std::string_view sharded_state_dict = "SHARDED_STATE_DICT";

// parallelism_config keys (CL:513-557; LA:900-976). They keep the parallelism_config_ prefix inside
// the nested mapping (LA:1258-1275 copies them to args unchanged). Any non-empty mapping turns on
// use_parallelism_config (LA:1242); the Accelerator then refuses sizes over 1 unless FSDP2 or a
// MULTI_* type runs (PC:379-385; the --use_parallelism_config flag needs FSDP2, LA:1205-1206), and
// their product must equal num_processes (PC:372-377).
inline constexpr std::string_view pc_dp_replicate = "parallelism_config_dp_replicate_size";
inline constexpr std::string_view pc_dp_shard = "parallelism_config_dp_shard_size";
inline constexpr std::string_view pc_tp = "parallelism_config_tp_size";
inline constexpr std::string_view pc_cp = "parallelism_config_cp_size";
// allgather (default: every rank gathers all K/V shards) | alltoall (ring rotation: K/V shards
// passed to the neighbour cp - 1 times), docs/source/concept_guides/context_parallelism.md:144-166.
inline constexpr std::string_view pc_cp_comm_strategy = "parallelism_config_cp_comm_strategy";
inline constexpr std::string_view pc_cp_backend = "parallelism_config_cp_backend";  // torch
inline constexpr std::string_view pc_sp = "parallelism_config_sp_size";             // DeepSpeed ALST/Ulysses
inline constexpr std::string_view pc_sp_keys[] = {"parallelism_config_sp_backend", "parallelism_config_sp_seq_length",
                                                  "parallelism_config_sp_seq_length_is_variable",
                                                  "parallelism_config_sp_attn_implementation"};
inline constexpr std::string_view cp_allgather = "allgather";
inline constexpr std::string_view cp_alltoall = "alltoall";

// fp8_config keys (LA:786-852; LA:1266-1267 prefixes a key without "fp8" with fp8_; UL:82-97
// exports them as ACCELERATE_FP8_<KEY>, which TERecipeKwargs / AORecipeKwargs read, DC:313-440).
inline constexpr std::string_view fp8_backend = "backend";    // TE | AO | MSAMP (FP8BackendType, DC:658-672)
inline constexpr std::string_view fp8_format = "fp8_format";  // HYBRID | E4M3 | E5M2
inline constexpr std::string_view fp8_amax_history_len = "amax_history_len";
inline constexpr std::string_view fp8_amax_compute_algo = "amax_compute_algo";  // max | most_recent
inline constexpr std::string_view fp8_use_mxfp8_block_scaling = "use_mxfp8_block_scaling";
inline constexpr std::string_view fp8_enable_fsdp_float8_all_gather = "enable_fsdp_float8_all_gather";  // AO, FSDP2
inline constexpr std::string_view fp8_backend_te = "TE";
inline constexpr std::string_view fp8_backend_ao = "AO";
inline constexpr std::string_view fp8_backend_msamp = "MSAMP";
inline constexpr std::string_view fp8_format_hybrid = "HYBRID";

// `accelerate launch` flags (LA line numbers; underscores, not dashes).
inline constexpr std::string_view launch = "launch";
inline constexpr std::string_view flag_config_file = "--config_file";              // LA:159
inline constexpr std::string_view flag_num_machines = "--num_machines";            // LA:201
inline constexpr std::string_view flag_num_processes = "--num_processes";          // LA:198, the total
inline constexpr std::string_view flag_machine_rank = "--machine_rank";            // LA:292
inline constexpr std::string_view flag_main_process_ip = "--main_process_ip";      // LA:295
inline constexpr std::string_view flag_main_process_port = "--main_process_port";  // LA:298
inline constexpr int default_main_process_port = 29500;  // UL:163, 210: the port used when none is given

// Decoder-layer classes for TRANSFORMER_BASED_WRAP (transformers' `_no_split_modules`).
inline constexpr std::string_view cls_llama = "LlamaDecoderLayer";
inline constexpr std::string_view cls_mistral = "MistralDecoderLayer";
inline constexpr std::string_view cls_mixtral = "MixtralDecoderLayer";
inline constexpr std::string_view cls_qwen2 = "Qwen2DecoderLayer";
inline constexpr std::string_view cls_qwen2_moe = "Qwen2MoeDecoderLayer";
inline constexpr std::string_view cls_qwen3 = "Qwen3DecoderLayer";
inline constexpr std::string_view cls_qwen3_moe = "Qwen3MoeDecoderLayer";
inline constexpr std::string_view cls_deepseek_v3 = "DeepseekV3DecoderLayer";
inline constexpr std::string_view cls_gpt2 = "GPT2Block";
inline constexpr std::string_view cls_gptj = "GPTJBlock";
inline constexpr std::string_view cls_gpt_neox = "GPTNeoXLayer";
inline constexpr std::string_view cls_bert = "BertLayer";

}  // namespace shardplan::interop::accelerate_flags
