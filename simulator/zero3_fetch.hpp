#pragma once
// ZeRO-3 fetched tensor by tensor, each collective blocking (ParallelConfig::zero3_fetch =
// per_tensor_sync): DeepSpeed's first ZeRO-3 (0.3.13 to 0.4.0). The unit-wise, prefetching
// fetch of FSDP and today's DeepSpeed stays in step_model.cpp's chunk_time.
#include <vector>

#include "step_model.hpp"

namespace shardplan::simulator {

// One parameter tensor of a block as one tp rank holds it.
struct ParamTensor {
  double elements = 0;
  bool trainable = true;  // false: a frozen base weight under LoRA
};

// The parameter tensors of one transformer block held by a tp rank: each linear's weight (split
// over tp) and bias (split when column-parallel), each norm's weight (and bias for LayerNorm), and
// under LoRA the adapters' A and B.
std::vector<ParamTensor> block_param_tensors(const ModelContext& mc, int tp);

// DeepSpeed's stage3_param_persistence_threshold default: tensors below 1e5 elements stay whole
// on every rank and are never gathered (DeepSpeed ZeRO config docs, "stage3_param_persistence_threshold").
inline constexpr double kPersistenceThresholdElements = 1e5;

// The largest module gathered at once under per_tensor_sync (a linear's weight + bias), elements.
double largest_fetched_module(const ModelContext& mc, int tp);

// One micro-batch of a chunk under per_tensor_sync: every fetch and gradient reduce-scatter is a
// blocking collective of its own, exposed in full.
struct Zero3SyncTime {
  double forward_s = 0;   // all-gathers of the forward
  double backward_s = 0;  // all-gathers of the recompute (full recompute) and backward, reduce-scatters
  double comm_s = 0;      // the same, all of it (nothing hides)
};
Zero3SyncTime per_tensor_sync_time(const ConfigContext& c, const ChunkShape& sh);

}  // namespace shardplan::simulator
