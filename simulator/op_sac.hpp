#pragma once
// torchtitan's per-op selective activation checkpointing (Recompute::op_sac; [activation_checkpoint]
// mode "selective", selective_ac_option "op"). Each block runs under torch.utils.checkpoint with a
// selective-checkpoint policy (torchtitan/distributed/activation_checkpoint.py:52-137 @73a0e697):
// an op on the model's save list (llama3/infra/parallelize.py:36-52: aten.mm, the SDPA flash,
// efficient, cuDNN and fused kernels, varlen attention, _c10d_functional.reduce_scatter_tensor,
// aten.max, ...) is MUST_SAVE, except every second aten.mm of the block (mm_count, lines 108-116);
// everything else is PREFER_RECOMPUTE. PyTorch's selective checkpoint (torch/utils/checkpoint.py,
// _CachingTorchDispatchMode and _CachedTorchDispatchMode) keeps the outputs of the saved ops beside
// the checkpoint's inputs, and in backward runs the block's forward again, every op but the saved
// ones (taken from that cache) executing; torchtitan's early_stop is off (config/job_config.py:675),
// so the whole forward reruns.
//
// What reaches that policy as aten.mm: a linear without bias (at::linear -> matmul -> mm); a linear
// with a bias on a contiguous input runs aten.addmm, which is not on the list and is not counted
// (pytorch aten/src/ATen/native/Linear.cpp:57-70, 94-111 @81735ee6f5da25b75bccd580b6958c36c92166af).
// Eager attention's matmuls are aten.bmm and its softmax and dropout are not on the list either:
// the whole core reruns and none of its tensors are kept.
#include <vector>

#include "layer_cost.hpp"

namespace shardplan::simulator {

// Parallel to `linears` (in the order the block runs them): whether op_sac keeps the linear's
// output, the 1st, 3rd, 5th, ... of the bias-free ones.
std::vector<char> op_sac_kept_linears(const std::vector<LinearDesc>& linears);

// Stored activation bytes of one block for one micro-batch on one tp rank under op_sac.
double op_sac_activation_bytes(const CostEnv& env);

// The forward work op_sac keeps the outputs of, so that backward does not run it again: the kept
// linears' GEMMs and, with flash (SDPA), the attention kernel, whose forward block_cost timed as
// `attn_core_s` and counted as `attn_core_flops`.
struct OpSacKept {
  double forward_s = 0, forward_flops = 0;
};
OpSacKept op_sac_kept_forward(const CostEnv& env, double attn_core_s, double attn_core_flops);

}  // namespace shardplan::simulator
