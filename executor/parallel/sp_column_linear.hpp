#pragma once
// Column-parallel linears under sequence parallelism that share one input, as Megatron-LM does
// it (Korthikanti et al. 2022, "Reducing Activation Recomputation", §4.2.2): the input is
// all-gathered along the sequence in forward and gathered again in backward, so only the local
// sequence shard is kept for backward — not one gathered copy per linear.
//
// Legend: B batch, S sequence, t = tp size, in/out features.
//   x: (B, S/t, in)   ws[i]: (out_i/t, in)   ->   ys[i] = gather_S(x) @ ws[i]^T: (B, S, out_i/t)
//   forward   one all-gather of x (in the compute dtype); saves x's shard and the weights
//   backward  re-gather x; dx = reduce_scatter_S(sum_i gy_i @ ws[i]); dws[i] = gy_i^T gather_S(x)
// Weights are saved as the parameters themselves (ZeRO-3 re-gathers them before backward, as in
// zero_linear.hpp); under autocast the GEMMs run in the autocast dtype and weight gradients come
// back in the parameters' dtype. Biases and LoRA adapters are added by the caller.
#include <torch/torch.h>

#include <vector>

#include "executor/comm/communicator.hpp"

namespace shardplan::executor {

std::vector<torch::Tensor> sp_column_linears(const torch::Tensor& x, const std::vector<torch::Tensor>& ws,
                                             Communicator& tp);

}  // namespace shardplan::executor
