#pragma once
// The MoE load-balancing auxiliary loss (Switch Transformer, Fedus et al. 2021, eq. 4; Megatron-Core
// d98e8a64 moe_utils.py switch_load_balancing_loss_func and router.py _apply_aux_loss):
//
//   aux = coeff * E / (k * T^2) * sum_e (sum_n p_ne) * c_e
//
// p: (N, E) router probabilities of this rank's N tokens, c_e: copies routed to expert e (top-k,
// before any capacity dropping) counted over every rank that routes a part of the same micro-batch
// (the cp ranks, and the tp ranks when each routes its own sequence shard: etp = 1), T = N x their
// number: each rank's local aux is its share, and the shares sum to the micro-batch's aux. Only p
// carries a gradient (c is a count).
//
// As Megatron's MoEAuxLossAutoScaler, the loss is not added to the language-model loss: it is
// attached to the routed output, whose backward also sends `scale` x d(aux) into the router, with
// scale = the step's loss multiplier / the global batch's micro-batches (set_moe_aux_loss_scale):
// the objective is the LM loss plus the mean over micro-batches of their aux loss, whatever the
// layout. Where every tp rank routes the same tokens (etp = tp), each computes aux / tp, since the
// router's gradient is summed over tp.
#include <torch/torch.h>

#include <vector>

#include "executor/comm/communicator.hpp"

namespace shardplan::executor {

struct MoeAuxLoss {
  double coeff = 0;                         // 0: no auxiliary loss
  std::vector<Communicator*> route_groups;  // ranks routing other parts of the micro-batch
  double replicas = 1;                      // ranks routing the same tokens (etp = tp: tp)
  [[nodiscard]] bool enabled() const { return coeff > 0; }
};

// The step's backward scale of every aux loss (the LM loss multiplier / micro-batches per global
// batch); process-wide, as Megatron's MoEAuxLossAutoScaler.main_loss_backward_scale.
void set_moe_aux_loss_scale(double scale);

// `out` unchanged; its backward adds scale x d(aux)/d(probs). probs: (N, E) fp32 with grad,
// top_e: (N, k). Returns the local aux value in `value` (for the metrics).
torch::Tensor attach_aux_loss(const torch::Tensor& out, const torch::Tensor& probs, const torch::Tensor& top_e,
                              const MoeAuxLoss& a, double* value);

}  // namespace shardplan::executor
