// What a block keeps for backward, per micro-batch on one tp rank (the legend of layer_cost.cpp):
// the op-by-op derivation of Korthikanti et al. 2022, §4.1, generalised to GQA, SwiGLU, parallel
// residual, MLA, FP8 linears, flash attention, MoE and LoRA adapters.
#include <array>

#include "layer_cost.hpp"
#include "moe_cost.hpp"
#include "op_sac.hpp"

namespace shardplan::simulator {

namespace {

// Which regions' inputs a block keeps for backward. A matmul keeps its input only to form its
// weight's gradient (PyTorch's autograd saves mm's `self` only when `mat2` needs a gradient,
// pytorch/pytorch#97575; Transformer Engine's Linear: backward_needs_input = weight.requires_grad).
// So every input is kept in training, and under LoRA (base frozen) only where an adapter reads it
// undropped (a dropped adapter keeps its own dropped copy, counted with the adapter).
std::array<bool, 4> kept_linear_inputs(const CostEnv& env) {
  if (!env.lora) return {true, true, true, true};
  std::array<bool, 4> kept{};
  int rows_seen = 0;
  for (std::size_t i = 0; i < env.linears->size(); ++i) {
    const int region = linear_region((*env.linears)[i], rows_seen);
    if ((*env.lora_mask)[i] && env.lora_dropout == 0) kept[region] = true;
  }
  return kept;
}

}  // namespace

double block_activation_bytes(const CostEnv& env, Recompute recompute) {
  const ModelSpec& m = *env.model;
  const double M = env.s * env.b, h = m.hidden, t = env.tp, e = env.act_bytes;
  const double rep = env.sp ? 1.0 / t : 1.0;
  const bool hidden_drop = m.hidden_dropout > 0;
  if (recompute == Recompute::full) return e * M * h * rep;  // the block's input only
  if (recompute == Recompute::op_sac) return op_sac_activation_bytes(env);
  // FP8 linears keep their input for wgrad as the FP8 copy (1 byte; TE saves the quantised
  // tensor), unless LoRA adapters read the same input in 16-bit.
  const bool fp8_inputs = env.fp8 != Fp8Recipe::none && !env.lora;
  const double li = fp8_inputs ? 1.0 : e;  // bytes per stored linear input
  const std::array<bool, 4> kept = kept_linear_inputs(env);
  const bool one_norm = m.norms_per_layer == 1;  // parallel residual: one norm feeds both
  double bytes = 0;
  bytes += e * M * h * rep;                                         // norm1 input
  if (kept[0] || (one_norm && kept[2])) bytes += li * M * h * rep;  // qkv input (norm1 output)
  bytes += e * M * (m.q_dim() + m.kv_dim()) / t;                    // q, k for q @ k^T
  if (m.qk_norm) bytes += e * M * (m.q_dim() + m.kv_dim()) / t;     // q, k before their norms
  bytes += e * M * m.v_dim() / t;                                   // v for p @ v
  // The output projection's input; flash attention keeps it anyway (its O, for backward's D).
  if (kept[1] || fused(env.attention)) bytes += e * M * m.attn_out_dim() / t;
  if (fp8_inputs && fused(env.attention)) bytes += M * m.attn_out_dim() / t;  // O kept 16-bit for flash too
  if (fp8_inputs && env.attention == AttentionKind::eager) bytes -= (e - 1) * M * m.attn_out_dim() / t;
  if (m.mla.enabled()) {
    // MLA's latents (replicated over tp): the up-projections' inputs and their norms' inputs.
    bytes += 2 * e * M * (m.mla.q_lora_rank + m.mla.kv_lora_rank);
  }
  if (fused(env.attention)) {
    // FlashAttention-2 (Dao 2023, §3.1.1) keeps O (the output projection's input, above) and the
    // fp32 log-sum-exp per query row; in-kernel dropout keeps an RNG seed and offset. Nothing
    // s x s is stored, so selective recompute has nothing to drop (Megatron-LM skips it then).
    bytes += 4 * env.b * (m.num_heads / t) * env.s;
  } else if (recompute == Recompute::none) {  // eager: Korthikanti et al. 2022, §4.1 (its 5·a·s²·b terms)
    const double scores = env.b * (m.num_heads / t) * env.s * env.s_full;  // Ulysses: a/cp heads x s_full^2
    bytes += e * scores;                                                   // softmax output
    if (m.attention_dropout > 0) bytes += (1 + e) * scores;                // dropout mask + dropout output
  }
  if (hidden_drop) bytes += M * h * rep;                                         // attention residual dropout mask
  if (m.norms_per_layer == 2 && !m.parallel_residual) bytes += e * M * h * rep;  // norm2 input
  if (m.norms_per_layer == 2 && kept[2]) bytes += li * M * h * rep;              // MLP input (norm2 output)
  if (env.moe) bytes += moe_activation_bytes(env);                               // router, routed tokens, experts
  // The dense MLP, or the MoE block's shared expert (none: nothing more).
  const double f_local = (env.moe ? m.moe.shared_ffn_hidden : m.ffn_hidden) / t;
  // Activation in/out: SwiGLU eager keeps gate, up, silu(gate) and the product (FC2's input);
  // fused, the fc1 output [gate|up] and the product (silu recomputed); GELU its input and output.
  const bool fused_swiglu = m.ffn_kind == FfnKind::swiglu && fuses_pointwise(env.fusion);
  bytes += (m.ffn_kind == FfnKind::swiglu ? (fused_swiglu ? 3.0 : 4.0) : 2.0) * e * M * f_local;
  bytes -= (kept[3] ? e - li : e) * M * f_local;  // the output (FC2's input): FP8, or not kept
  if (hidden_drop) bytes += M * h * rep;          // MLP dropout mask
  if (env.lora) {
    for (std::size_t i = 0; i < env.linears->size(); ++i) {
      if (!(*env.lora_mask)[i]) continue;
      const LinearDesc& lin = (*env.linears)[i];
      const double d_in = lin.d_in_local(t);
      if (env.lora_dropout > 0) bytes += (1 + e) * M * d_in;  // dropout mask + dropped input
      bytes += e * M * env.lora_rank;                         // A's output, B's input
    }
  }
  return bytes;
}

}  // namespace shardplan::simulator
