#pragma once
// Tensor-parallel (Megatron) and sequence-parallel mappings as autograd-correct
// forward/backward pairs (Megatron-LM core/tensor_parallel/mappings.py). Every function is the
// identity when the group has one rank.
//
// Legend: B batch, S sequence, H hidden, t = tp group size, x: (B, S, H) unless noted.
//   copy_to_tp          fwd: identity                 bwd: all-reduce           (enter a TP region)
//   reduce_from_tp      fwd: all-reduce               bwd: identity             (leave a TP region)
//   gather_last_dim     fwd: all-gather on last dim   bwd: keep own slice
//   scatter_to_seq      fwd: keep own S/t slice       bwd: all-gather on S
//   gather_from_seq     fwd: all-gather on S          bwd: reduce-scatter on S  (SP: enter TP)
//   reduce_scatter_seq  fwd: reduce-scatter on S      bwd: all-gather on S      (SP: leave TP)
#include <torch/torch.h>

#include "executor/comm/communicator.hpp"

namespace shardplan::executor {

torch::Tensor copy_to_tp(const torch::Tensor& x, Communicator& tp);
torch::Tensor reduce_from_tp(const torch::Tensor& x, Communicator& tp);
torch::Tensor gather_last_dim(const torch::Tensor& x, Communicator& tp);
// x: (B, S, H) -> (B, S/t, H) and back; S must divide by t.
torch::Tensor scatter_to_seq(const torch::Tensor& x, Communicator& tp);
torch::Tensor gather_from_seq(const torch::Tensor& x, Communicator& tp);
torch::Tensor reduce_scatter_seq(const torch::Tensor& x, Communicator& tp);

// Plain (non-autograd) helpers on dimension 1 (sequence) and the last dimension.
torch::Tensor all_gather_dim(const torch::Tensor& x, Communicator& comm, int64_t dim);
torch::Tensor reduce_scatter_dim(const torch::Tensor& x, Communicator& comm, int64_t dim);

// The communicator an autograd node keeps for its backward (saved_data["comm"]).
inline void keep_comm(torch::autograd::AutogradContext* ctx, Communicator& comm) {
  ctx->saved_data["comm"] = reinterpret_cast<int64_t>(&comm);
}
inline Communicator& comm_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

}  // namespace shardplan::executor
