#pragma once
// Whether a block's backward finds what its forward saved still in the CPU's cache.
// Legend: C the last-level cache one rank gets (the node's C_node over the job's ranks on the
// node), A one block's stored activations for one micro-batch on this rank, W the block's weights
// and the gradients its backward writes, L the blocks of the stage.
// Between block i's forward and its backward the later blocks run forward and backward: each
// writes its A and touches its W. Under LRU, block i's saved tensors are still cached when the
// bytes touched since, about (L - 1 - i)(A + W), plus its own fit in C: the last C / (A + W)
// blocks of the stage run their backward warm, a fraction min(1, C / (L (A + W))) of them.
// (One micro-batch in flight; 1F1B's earlier stages hold up to p of them, which this ignores.)
// Measured on the project's Zen 5 VM (2026-11-28, executor/README.md): a model op's cold backward
// at 65k elements took 2.0-5.9x its warm one, at 4M elements 0.9-1.2x. tiny-llama on one rank
// (shardrun, global batch 8, two runs per micro-batch), predicted with every backward cold: +19,
// +22, +8, +3 % at micro-batches 1, 2, 4, 8; with this: +13, +18, +6, +3 %.
#include <algorithm>

namespace shardplan::simulator {

inline double warm_backward_fraction(double cache_bytes_per_rank, double blocks, double activation_bytes,
                                     double weight_and_grad_bytes) {
  const double per_block = activation_bytes + weight_and_grad_bytes;
  if (!(cache_bytes_per_rank > 0) || !(blocks > 0) || !(per_block > 0)) return 0.0;
  return std::clamp(cache_bytes_per_rank / (blocks * per_block), 0.0, 1.0);
}

}  // namespace shardplan::simulator
