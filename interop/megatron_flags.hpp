#pragma once
// Megatron-LM / Megatron-Core command-line flags: the one table both the export
// (megatron_export.cpp) and the import (megatron_import.cpp) use.
//
// Checked at NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22). Most flags
// are generated from dataclass fields by ArgumentGroupFactory (megatron/training/argument_utils.py):
// "--" + field.replace("_", "-"); bool fields defaulting to False are store_true. The fields live in
// megatron/core/model_parallel_config.py (MPC), megatron/core/transformer/transformer_config.py
// (TC) and megatron/training/config/training_config.py (TRC); the rest are add_argument calls in
// megatron/training/arguments.py (A). Line numbers are at that commit.
#include <string_view>

namespace shardplan::interop::megatron_flags {

// Parallelism (MPC:55-130; A:3095-3116, 3221).
inline constexpr std::string_view tp = "--tensor-model-parallel-size";        // MPC:55
inline constexpr std::string_view pp = "--pipeline-model-parallel-size";      // MPC:83
inline constexpr std::string_view cp = "--context-parallel-size";             // MPC:100
inline constexpr std::string_view cp_comm_type = "--cp-comm-type";            // A:3221: p2p | a2a | allgather | a2a+p2p
inline constexpr std::string_view ep = "--expert-model-parallel-size";        // MPC:127
inline constexpr std::string_view etp = "--expert-tensor-parallel-size";      // MPC:130 (None -> tp)
inline constexpr std::string_view sequence_parallel = "--sequence-parallel";  // MPC:94
inline constexpr std::string_view tp_comm_overlap = "--tp-comm-overlap";      // MPC:265 (TE userbuffers)
inline constexpr std::string_view tp_pp_dp_mapping = "--use-tp-pp-dp-mapping";                 // common_config.py:105
inline constexpr std::string_view first_stage_layers = "--decoder-first-pipeline-num-layers";  // A:3095
inline constexpr std::string_view last_stage_layers = "--decoder-last-pipeline-num-layers";    // A:3099
// A:3103, the grammar in megatron/core/transformer/pipeline_parallel_layer_layout.py:282-321
// (megatron_layout.hpp); excludes the two above (TC:2245-2259) and the two below (A:928-939).
inline constexpr std::string_view pipeline_layout = "--pipeline-model-parallel-layout";
// The embedding / the loss counted as one layer of an even split and taken off the first / last
// chunk (transformer_block.py:148-201); not with the uneven-stage flags (TC:2229-2239).
inline constexpr std::string_view account_embedding = "--account-for-embedding-in-pipeline-split";       // TC:137
inline constexpr std::string_view account_loss = "--account-for-loss-in-pipeline-split";                 // TC:141
inline constexpr std::string_view virtual_stages = "--num-virtual-stages-per-pipeline-rank";             // A:3116
inline constexpr std::string_view layers_per_virtual_stage = "--num-layers-per-virtual-pipeline-stage";  // A:3114

// Data parallelism, optimizer, offload (A:3069-3216; MPC:461).
inline constexpr std::string_view distributed_optimizer = "--use-distributed-optimizer";          // A:3156 (ZeRO-1)
inline constexpr std::string_view optimizer_instances = "--num-distributed-optimizer-instances";  // A:3216
inline constexpr std::string_view overlap_grad_reduce = "--overlap-grad-reduce";                  // A:3121
inline constexpr std::string_view overlap_param_gather = "--overlap-param-gather";  // A:3148 (needs the above)
inline constexpr std::string_view fp32_grad_reduce = "--accumulate-allreduce-grads-in-fp32";  // A:3069
inline constexpr std::string_view optimizer_cpu_offload = "--optimizer-cpu-offload";          // A:2918
inline constexpr std::string_view precision_aware_optimizer =
    "--use-precision-aware-optimizer";                                    // A:3667 (needed by the above, A:1884)
inline constexpr std::string_view megatron_fsdp = "--use-megatron-fsdp";  // common_config.py
inline constexpr std::string_view fsdp_sharding =
    "--data-parallel-sharding-strategy";  // A:3190: no_shard | optim | optim_grads | optim_grads_params
inline constexpr std::string_view activation_offload_layers = "--cpu-offloading-num-layers";  // MPC:461

// Batch and sequence (TRC:11-15; A:3305, 2394).
inline constexpr std::string_view micro_batch = "--micro-batch-size";
inline constexpr std::string_view global_batch = "--global-batch-size";
inline constexpr std::string_view seq_length = "--seq-length";
inline constexpr std::string_view max_positions = "--max-position-embeddings";

// Model shape (TC:65-288; A:2382-2460).
inline constexpr std::string_view num_layers = "--num-layers";
inline constexpr std::string_view hidden_size = "--hidden-size";
inline constexpr std::string_view num_heads = "--num-attention-heads";
inline constexpr std::string_view kv_channels = "--kv-channels";
inline constexpr std::string_view ffn_hidden_size = "--ffn-hidden-size";
inline constexpr std::string_view group_query_attention = "--group-query-attention";  // A:2382 (needed by the next)
inline constexpr std::string_view num_query_groups = "--num-query-groups";
inline constexpr std::string_view swiglu = "--swiglu";                // A:2450
inline constexpr std::string_view normalization = "--normalization";  // LayerNorm | RMSNorm
inline constexpr std::string_view position_embedding =
    "--position-embedding-type";                                        // A:2397: rope | learned_absolute | ...
inline constexpr std::string_view rotary_percent = "--rotary-percent";  // A:2420
inline constexpr std::string_view untie_embeddings = "--untie-embeddings-and-output-weights";  // A:2460
inline constexpr std::string_view qk_layernorm = "--qk-layernorm";                             // TC:259
inline constexpr std::string_view disable_bias_linear = "--disable-bias-linear";               // TC:212
inline constexpr std::string_view add_qkv_bias = "--add-qkv-bias";                             // TC:218
inline constexpr std::string_view attention_dropout = "--attention-dropout";                   // TC:191
inline constexpr std::string_view hidden_dropout = "--hidden-dropout";                         // TC:188
inline constexpr std::string_view mla = "--multi-latent-attention";                            // TC:288
inline constexpr std::string_view q_lora_rank = "--q-lora-rank";                               // A:3548
inline constexpr std::string_view kv_lora_rank = "--kv-lora-rank";                             // A:3550
inline constexpr std::string_view qk_head_dim = "--qk-head-dim";                               // A:3552
inline constexpr std::string_view qk_pos_emb_head_dim = "--qk-pos-emb-head-dim";               // A:3554
inline constexpr std::string_view v_head_dim = "--v-head-dim";                                 // A:3556

// MoE (A:3518-3536; TC:701-917).
inline constexpr std::string_view num_experts = "--num-experts";
inline constexpr std::string_view router_topk = "--moe-router-topk";
inline constexpr std::string_view moe_ffn_hidden_size = "--moe-ffn-hidden-size";
inline constexpr std::string_view shared_expert_size = "--moe-shared-expert-intermediate-size";
inline constexpr std::string_view shared_expert_gate = "--moe-shared-expert-gate";  // TC:713
inline constexpr std::string_view moe_layer_freq = "--moe-layer-freq";
inline constexpr std::string_view token_dispatcher =
    "--moe-token-dispatcher-type";  // TC:891: allgather | alltoall | flex
inline constexpr std::string_view grouped_gemm = "--moe-grouped-gemm";
inline constexpr std::string_view capacity_factor = "--moe-expert-capacity-factor";  // TC:917 (None: dropless)

// Recompute, precision, attention (TC:532-624; A:2016, 2869, 2910).
inline constexpr std::string_view recompute_granularity = "--recompute-granularity";  // full | selective
inline constexpr std::string_view recompute_method = "--recompute-method";            // uniform | block
inline constexpr std::string_view recompute_num_layers = "--recompute-num-layers";
inline constexpr std::string_view recompute_activations = "--recompute-activations";  // = granularity selective
inline constexpr std::string_view bf16 = "--bf16";
inline constexpr std::string_view fp16 = "--fp16";
inline constexpr std::string_view fp8_format = "--fp8-format";  // e4m3 | hybrid
inline constexpr std::string_view fp8_recipe = "--fp8-recipe";  // tensorwise | delayed | mxfp8 | blockwise | custom
inline constexpr std::string_view fp8_amax_history = "--fp8-amax-history-len";
inline constexpr std::string_view fp8_amax_algo = "--fp8-amax-compute-algo";
inline constexpr std::string_view fp8_param_gather = "--fp8-param-gather";  // A:2016
inline constexpr std::string_view attention_backend =
    "--attention-backend";  // TC:151: flash | fused | unfused | local | auto
inline constexpr std::string_view use_flash_attn = "--use-flash-attn";  // A:2910: parses, read by nothing (legacy)

// torchrun (the launcher before pretrain_gpt.py).
inline constexpr std::string_view nnodes = "--nnodes";
inline constexpr std::string_view nproc_per_node = "--nproc-per-node";
inline constexpr std::string_view nproc_per_node_underscore = "--nproc_per_node";

}  // namespace shardplan::interop::megatron_flags
