// Legend as layer_cost.cpp's: M = s*b tokens of this rank, h hidden, t tp, e bytes per
// activation element, rep = 1/t with sequence parallelism (else 1).
#include "op_sac.hpp"

namespace shardplan::simulator {

std::vector<char> op_sac_kept_linears(const std::vector<LinearDesc>& linears) {
  std::vector<char> kept(linears.size(), 0);
  int mm_count = 0;  // activation_checkpoint.py:113-116: the even-numbered mms are recomputed
  for (std::size_t i = 0; i < linears.size(); ++i)
    if (!linears[i].bias) kept[i] = ++mm_count % 2 == 1;
  return kept;
}

double op_sac_activation_bytes(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const double M = env.s * env.b, h = m.hidden, t = env.tp, e = env.act_bytes;
  const double rep = env.sp ? 1.0 / t : 1.0;
  double bytes = e * M * h * rep;  // the block's input, saved by the checkpoint
  const std::vector<char> kept = op_sac_kept_linears(*env.linears);
  // A kept mm's output: a row-parallel linear's is its (M, h) partial sum, before the reduction.
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (kept[i]) bytes += e * M * (*env.linears)[i].d_out_local(t);
  // SDPA's outputs: O and the fp32 log-sum-exp per query row (and the RNG seed and offset).
  if (env.attention == AttentionKind::flash)
    bytes += e * M * m.attn_out_dim() / t + 4 * env.b * (m.num_heads / t) * env.s;
  // Sequence parallelism: each reduce-scatter's (M/t, h) output (one with a parallel residual);
  // the all-gathers (and without SP the all-reduces) are not on the list.
  if (env.sp && t > 1) bytes += (m.parallel_residual ? 1.0 : 2.0) * e * M * h / t;
  return bytes;
}

OpSacKept op_sac_kept_forward(const CostEnv& env, double attn_core_s, double attn_core_flops) {
  const double M = env.s * env.b, t = env.tp;
  OpSacKept k;
  const std::vector<char> kept = op_sac_kept_linears(*env.linears);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (!kept[i]) continue;
    const LinearDesc& lin = (*env.linears)[i];
    k.forward_s += gemm_time_s(env, M, lin.d_in_local(t), lin.d_out_local(t));
    k.forward_flops += 2.0 * M * lin.d_in_local(t) * lin.d_out_local(t);
  }
  if (env.attention == AttentionKind::flash) {
    k.forward_s += attn_core_s;
    k.forward_flops += attn_core_flops;
  }
  return k;
}

}  // namespace shardplan::simulator
