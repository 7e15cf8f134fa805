#pragma once
// The mixture-of-experts MLP of an MoE block (Shazeer et al. 2017; Fedus et al. 2021, Switch
// Transformer; Jiang et al. 2024, Mixtral; Qwen2-MoE), as Hugging Face computes it
// (transformers 00a3f9386614dde0dc41cf4e9b8d0abd3af0671d, modeling_qwen2_moe.py
// Qwen2MoeSparseMoeBlock; MixtralSparseMoeBlock is the same with the renormalisation always on
// and no shared expert):
//   router   logits = x Wr^T (E, H), p = softmax(logits) in fp32, top-k of p; renormalised to sum
//            1 over the k (Mixtral always; Qwen2-MoE's norm_topk_prob, default False: off for
//            the llama family's Qwen-style cards)
//   dispatch dropless: the N*k routed copies sorted by expert (stable), each expert's SwiGLU MLP
//            run on its contiguous rows ("grouped"), every local expert run even with no rows so
//            its gradient (zero) always arrives
//   combine  y_n = sum over the k picks of p_nk * expert(x_n), by index_add
//   shared   Qwen2-MoE's always-on shared expert (the block's gate/up/down linears, named
//            mlp.shared_expert.*) plus optionally sigmoid(x Wg^T) on it (mlp.shared_expert_gate)
//   aux loss none: shardrun trains without the load-balancing auxiliary loss, i.e. coefficient 0
//            (Megatron-Core d98e8a64 transformer_config.py moe_aux_loss_coeff = 0.0; Hugging Face
//            adds router_aux_loss_coef x loss only with output_router_logits, off by default)
// Tensor parallelism (etp = tp): each expert's gate/up are column-, down row-split like the dense
// MLP; the routed output stays a partial sum over tp until one reduce for all experts (all-reduce,
// or reduce-scatter under SP), so the router's gradient is partial per tp rank and is summed over
// tp with the other partial gradients (Parameter::tp_partial_grad).
// Expert parallelism: experts [j*E/ep, (j+1)*E/ep) live on ep rank j; the routed copies travel
// there and back by all-to-all (parallel/expert_dispatch.hpp).
// LoRA on experts (PEFT names: experts.{e}.gate_proj / w1 ...): y += (alpha/r) B(A x) per expert
// linear, all local like the base; column A and row B are tp-replicated with partial gradients.
// Capacity (Megatron-Core d98e8a64 moe_utils.py get_capacity / apply_router_token_dropping,
// drop_policy "probs"): with capacity factor c > 0 each expert keeps at most
// C = ceil(N*k/E * c) of the micro-batch's N*k routed copies, those of highest routing weight
// (after the renormalisation); the rest are not dispatched and add nothing (the residual carries
// the token). N is the micro-batch's tokens on this ep rank, counted before dispatch, as
// Megatron's router counts its rank's tokens (there: each tp rank's sequence shard under SP;
// here the whole micro-batch, which every tp rank routes alike).
//
// Legend: N tokens of the micro-batch (B*S; under SP gathered over tp first), H hidden, E experts,
// k top-k, F expert width, t tp size, El = E/ep local experts.
#include <torch/torch.h>

#include <optional>
#include <vector>

#include "executor/comm/communicator.hpp"
#include "executor/parallel/layers.hpp"
#include "moe_aux_loss.hpp"

namespace shardplan::executor {

struct ExpertWeights {
  torch::Tensor gate, up;  // (F/t, H) column-parallel
  torch::Tensor down;      // (H, F/t) row-parallel
  // Adapters when the plan's lora.targets name the expert's linears (else empty): gate/up
  // A (r, H) replicated, B (F/t, r); down A (r, F/t), B (H, r) replicated. No LoRA dropout.
  std::optional<LoraAdapter> gate_lora = std::nullopt, up_lora = std::nullopt, down_lora = std::nullopt;
};

// Per-layer routing figures of the micro-batches run since the last reset.
struct MoeRoutingStats {
  double imbalance_sum = 0;  // sum over (layer, micro-batch) of max_e tokens_e / mean_e tokens_e
  double imbalance_max = 0;
  int64_t samples = 0;
  int64_t routed = 0;   // routed copies (tokens x k) of the micro-batches recorded
  int64_t dropped = 0;  // of them, dropped by the capacity (0 when dropless)
  double aux_sum = 0;   // this rank's shares of the load-balancing aux losses (moe_aux_loss.hpp)
};

struct MoeMlp {
  torch::Tensor router;                // (E, H) replicated
  torch::Tensor shared_gate;           // (1, H) Qwen2-MoE's shared_expert_gate; undefined if none
  std::vector<ExpertWeights> experts;  // this ep rank's El experts
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t first_expert = 0;  // global index of experts[0]
  bool renormalize = false;
  double capacity_factor = 0;  // 0: dropless; > 0: Megatron's per-expert capacity
};

// Which routed copies (N, k) an expert keeps under capacity `capacity`: per expert, the
// `capacity` of highest weight `top_p` (N, k) among those with `top_e` (N, k) = e (Megatron's
// topk over the token dimension of the (N, E) probabilities).
torch::Tensor capacity_keep_mask(const torch::Tensor& top_p, const torch::Tensor& top_e, int64_t num_experts,
                                 int64_t capacity);
// Megatron-Core's get_capacity for N tokens top-k over E experts: ceil(N*k/E * factor).
int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t num_experts, double factor);

// The routed experts' output for x: (N, H), replicated over tp -> (N, H), a partial sum over tp
// (complete when t = 1). `ep`: the expert-parallel group (null or size 1: every expert local).
// Adds this micro-batch's load imbalance (after the capacity) and drops to `stats` when given.
// `aux`: the load-balancing auxiliary loss to attach (null or coeff 0: none).
torch::Tensor moe_routed_experts(const MoeMlp& m, const torch::Tensor& x, Communicator* ep, MoeRoutingStats* stats,
                                 const MoeAuxLoss* aux = nullptr);

}  // namespace shardplan::executor
