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
// On the project's Zen 5 VM (2026-11-28) a model op's backward ran 30-50 % faster warm than after
// a sweep of the cache, and tiny-llama on one rank (4 blocks, hidden 256, seq 128) was predicted
// +15 / +19 / +29 / +19 / +7 / +7 / -1 / +5 % at micro-batches 1, 1, 2, 2, 4, 4, 8, 8 with every
// backward timed cold (`/tmp/mbs.sh` in the session note: one profile, two runs each).
#include <algorithm>

namespace shardplan::simulator {

inline double warm_backward_fraction(double cache_bytes_per_rank, double blocks, double activation_bytes,
                                     double weight_and_grad_bytes) {
  const double per_block = activation_bytes + weight_and_grad_bytes;
  if (!(cache_bytes_per_rank > 0) || !(blocks > 0) || !(per_block > 0)) return 0.0;
  return std::clamp(cache_bytes_per_rank / (blocks * per_block), 0.0, 1.0);
}

}  // namespace shardplan::simulator
