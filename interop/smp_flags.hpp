#pragma once
// SageMaker model parallel library v2 (SMP v2, torch.sagemaker) names: the one table both the v2
// export (smp_v2_export.cpp) and import (smp_v2_import.cpp) use.
//
// Parameters: AWS "The SageMaker model parallel library v2 reference", SMP v2 core feature
// configuration parameters (docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-
// reference.html), the same nine fields as sagemaker-python-sdk v3's typed SMP class
// (sagemaker-train/src/sagemaker/train/distributed.py at 3203e499, 2025-11-20). They go in the
// estimator's distribution["smdistributed"]["modelparallel"]["parameters"], next to
// "torch_distributed": {"enabled": true} (amazon-sagemaker-examples, llama_v2_v3/
// sm-fsdp-tp-cp_train_llama_v2_v3.ipynb at cf8f7dd2, 2025-01-29). SMP v2 has no pipeline key.
//
// Hyperparameters: the example training script's arguments (amazon-sagemaker-examples
// build_and_train_models/sm-distributed_model_parallel_v2/shared-scripts/arguments.py at a39b68fa,
// 2024-10-17); the FSDP sharding strategy, batch, checkpointing and FP8 are set there, not in the
// SMP parameters.
#include <string_view>

namespace shardplan::interop::smp_flags {

// distribution
inline constexpr std::string_view torch_distributed = "torch_distributed";
inline constexpr std::string_view smdistributed = "smdistributed";
inline constexpr std::string_view modelparallel = "modelparallel";
inline constexpr std::string_view enabled = "enabled";
inline constexpr std::string_view parameters = "parameters";

// SMP v2 parameters (defaults per the reference: 0, true, 2, true, false, 1, 1, 1).
inline constexpr std::string_view hybrid_shard_degree =
    "hybrid_shard_degree";  // 0: all (FULL_SHARD when tp 1); 1: no shard
inline constexpr std::string_view activation_offloading = "sm_activation_offloading";
inline constexpr std::string_view activation_loading_horizon = "activation_loading_horizon";
inline constexpr std::string_view cache_flush_warnings = "fsdp_cache_flush_warnings";
inline constexpr std::string_view allow_empty_shards = "allow_empty_shards";
inline constexpr std::string_view tensor_parallel_degree = "tensor_parallel_degree";
inline constexpr std::string_view context_parallel_degree = "context_parallel_degree";  // <= hybrid_shard_degree
inline constexpr std::string_view expert_parallel_degree = "expert_parallel_degree";
inline constexpr std::string_view random_seed = "random_seed";

// The example script's hyperparameters (shared-scripts/arguments.py).
inline constexpr std::string_view hyperparameters = "hyperparameters";
inline constexpr std::string_view train_batch_size = "train_batch_size";    // per data-parallel rank
inline constexpr std::string_view max_context_width = "max_context_width";  // sequence length
inline constexpr std::string_view bf16 = "bf16";                            // int 0/1
inline constexpr std::string_view fp8 = "fp8";                              // int 0/1 (TE DelayedScaling HYBRID)
inline constexpr std::string_view activation_checkpointing = "activation_checkpointing";  // int 0/1, every layer
inline constexpr std::string_view sharding_strategy =
    "sharding_strategy";  // no_shard | shard_grad_op | hybrid_shard | _hybrid_shard_zero2 | full_shard
inline constexpr std::string_view use_smp_implementation =
    "use_smp_implementation";                                           // int 0/1 (needed for tp/cp/ep/fp8)
inline constexpr std::string_view cp_comm_type = "cp_comm_type";        // p2p | all_gather
inline constexpr std::string_view moe = "moe";                          // int 0/1
inline constexpr std::string_view use_orig_params = "use_orig_params";  // int 0/1
inline constexpr std::string_view max_steps = "max_steps";

}  // namespace shardplan::interop::smp_flags
