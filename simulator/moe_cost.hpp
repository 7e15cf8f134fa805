#pragma once
// The routed part of an MoE block, per micro-batch on one rank: router, token dispatch over the
// expert-parallel group, the local experts' grouped GEMMs, combine. The attention, norms and the
// shared expert are costed with the block's other linears (layer_cost.cpp).
#include "layer_cost.hpp"

namespace shardplan::simulator {

struct MoeLayerCost {
  double forward_s = 0, backward_s = 0;             // compute: router, permutes, expert GEMMs, activation
  double forward_flops = 0, backward_flops = 0;     // at balanced load (what the model needs)
  double weight_grad_s = 0, weight_grad_flops = 0;  // of backward: router and expert weight gradients
  double comm_forward_s = 0, comm_backward_s = 0;   // dispatch + combine all-to-alls (+ etp gather/scatter)
  double dispatch_bytes = 0;  // one dispatch all-to-all: what this rank sends (its T*k routed copies)
  double load_imbalance = 1;  // the busiest expert-parallel rank's tokens over the mean (<= capacity)
  double stored_bytes = 0;    // activations kept for backward (no recompute)
};

// Tokens that enter the MoE layer on this rank: its s/cp x b tokens, split over tp by sequence
// parallelism (Megatron-Core routes the sequence-parallel shard).
double moe_tokens(const CostEnv& env);

// The busiest of ep ranks, over the mean: each of the group's ep*T*k routed copies lands on a
// given rank with probability 1/ep, so a rank's load is Binomial(ep*T*k, 1/ep); its expected
// maximum over ep ranks is 1 + E[max of ep normals] * sqrt((1 - 1/ep) / (T*k)). A balanced
// router's floor (auxiliary-loss balancing, Fedus et al. 2021 §2.2, drives it there); capped by
// the capacity factor when tokens are dropped.
double moe_load_imbalance(const CostEnv& env);

MoeLayerCost moe_layer_cost(const CostEnv& env, bool trainable);

// Stored activations of the routed part (router probabilities, permuted tokens, the experts'
// intermediate and output): proportional to top_k, not to the number of experts.
double moe_activation_bytes(const CostEnv& env);

}  // namespace shardplan::simulator
