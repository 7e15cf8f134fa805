// Legend (per micro-batch, one rank): T tokens entering the MoE layer (moe_tokens), k top-k,
// E experts, E_l = E/ep local experts, h hidden, f an expert's FFN width, etp/ep expert tensor /
// expert parallel degrees, lambda the load imbalance, e bytes per activation element.
// Shapes: routed copies (T*k, h) leave the rank; an expert-tensor group gathers etp*T*k of them;
// each local expert runs (etp*T*k*lambda/E_l, h) @ (h, f/etp) gate/up and (., f/etp) @ (f/etp, h).
// Flow (Megatron-Core MoELayer with the all-to-all token dispatcher): router GEMM + top-k ->
// permute -> all-to-all dispatch over ep -> all-gather over etp -> grouped GEMMs -> reduce-scatter
// over etp -> all-to-all combine -> unpermute (weighted by the router's probabilities).
#include "moe_cost.hpp"

#include <algorithm>
#include <cmath>

#include "order_statistics.hpp"

namespace shardplan::simulator {

double moe_tokens(const CostEnv& env) { return env.s * env.b / (env.tp > 1 ? env.tp : 1.0); }

double moe_load_imbalance(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const double copies = moe_tokens(env) * m.moe.top_k;
  double lambda = 1.0;
  if (env.ep > 1 && copies > 0)
    lambda += expected_max_normal(static_cast<int>(env.ep)) * std::sqrt((1.0 - 1.0 / env.ep) / copies);
  if (env.moe_capacity_factor > 0) lambda = std::min(lambda, env.moe_capacity_factor);
  return lambda;
}

MoeLayerCost moe_layer_cost(const CostEnv& env, bool trainable) {
  const ModelSpec& m = *env.model;
  const HardwareProfile& hw = *env.hw;
  const DeviceProfile& dev = hw.device;
  const double T = moe_tokens(env), k = m.moe.top_k, E = m.moe.num_experts, h = m.hidden, e = env.act_bytes;
  const double E_l = E / env.ep, lambda = moe_load_imbalance(env);
  const double routed = T * k;                       // copies this rank routes
  const double handled = env.etp * routed * lambda;  // copies this rank's experts run (busiest rank)
  MoeLayerCost c;
  c.load_imbalance = lambda;
  // Router: (T, h) @ (h, E) logits, softmax/sigmoid + top-k over fp32 scores (3 passes).
  const double router = gemm_time_s(env, T, h, E);
  c.forward_s += router + memory_time_s(env, 3 * 4 * T * E);
  c.backward_s += (trainable ? 2 : 1) * router + memory_time_s(env, 2 * 4 * T * E);
  c.forward_flops += 2 * T * h * E;
  c.backward_flops += (trainable ? 2 : 1) * 2 * T * h * E;
  if (trainable) c.weight_grad_s += router, c.weight_grad_flops += 2 * T * h * E;
  // Permute (T -> T*k rows) and unpermute (weighted sum back): memory-bound, the same in backward.
  const double permutes = 2 * memory_time_s(env, e * h * (T + routed * lambda));
  c.forward_s += permutes;
  c.backward_s += permutes;
  // The local experts' GEMMs, one grouped kernel per linear (CUTLASS grouped GEMM): each expert's
  // problem runs at the efficiency of its own size, one launch for the group.
  const double per_expert = handled / E_l;
  double f_local = 0;
  for (std::size_t i = 0; i < env.expert_linears->size(); ++i) {
    const LinearDesc& lin = (*env.expert_linears)[i];
    const double d_in = lin.d_in_local(env.etp), d_out = lin.d_out_local(env.etp);
    const double t = E_l * block_gemm_time_s(env, per_expert, d_in, d_out) - (E_l - 1) * dev.kernel_launch_s;
    const double flops = 2 * env.etp * routed * d_in * d_out;  // balanced
    c.forward_s += t;
    c.backward_s += (trainable ? 2 : 1) * t;
    c.forward_flops += flops;
    c.backward_flops += (trainable ? 2 : 1) * flops;
    if (trainable) c.weight_grad_s += t, c.weight_grad_flops += flops;
    if (env.lora && env.expert_lora_mask != nullptr && (*env.expert_lora_mask)[i]) {
      // The expert's adapter: x A^T (d_in -> r), then B (r -> d_out), per expert one kernel each
      // (shardrun runs them expert by expert); backward computes both inputs' and weights' grads.
      const double r = env.lora_rank;
      const double tl =
          E_l * (block_gemm_time_s(env, per_expert, d_in, r) + block_gemm_time_s(env, per_expert, r, d_out));
      const double fl = 2 * env.etp * routed * r * (d_in + d_out);
      c.forward_s += tl;
      c.backward_s += 2 * tl;
      c.forward_flops += fl;
      c.backward_flops += 2 * fl;
      c.weight_grad_s += tl;  // the adapters train
      c.weight_grad_flops += fl;
    }
    if (lin.split == TpSplit::row) f_local = d_in;
    if (env.fp8 != Fp8Recipe::none)  // the routed input / output gradient cast to FP8 (TE cast-transpose)
      c.forward_s += memory_time_s(env, handled * d_in * (e + 2)),
          c.backward_s += memory_time_s(env, handled * d_out * (e + 2));
  }
  // Activation over the experts' intermediate (silu(gate) * up, or gelu); backward ~2x the bytes.
  const double act = (m.ffn_kind == FfnKind::swiglu ? 5.0 : 2.0) * e * handled * f_local;
  c.forward_s += memory_time_s(env, act);
  c.backward_s += memory_time_s(env, 2 * act);
  // Dispatch and combine: all-to-alls of the routed copies over ep (the busiest rank receives
  // lambda times the mean), an all-gather / reduce-scatter over etp; backward mirrors forward.
  c.dispatch_bytes = e * routed * h;
  double comm = 2 * all_to_all_s(lambda * c.dispatch_bytes, env.ep_group, hw, env.devices_per_node);
  if (env.etp > 1) {
    comm += all_gather_s(e * handled * h, env.etp_group, hw, env.devices_per_node) +
            reduce_scatter_s(e * handled * h, env.etp_group, hw, env.devices_per_node);
  }
  c.comm_forward_s = c.comm_backward_s = comm;
  c.stored_bytes = moe_activation_bytes(env);
  return c;
}

double moe_activation_bytes(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const double T = moe_tokens(env), k = m.moe.top_k, E = m.moe.num_experts, h = m.hidden, e = env.act_bytes;
  const double lambda = moe_load_imbalance(env);
  const double copies = T * k * lambda;                    // per rank, expert-width-sharded rows
  const double li = env.fp8 != Fp8Recipe::none ? 1.0 : e;  // FP8 GEMM inputs kept as FP8 copies
  const double f = static_cast<double>(m.moe.expert_ffn_hidden);
  double bytes = 4 * T * E + 12 * T * k;  // fp32 router probabilities; top-k indices and weights
  bytes += li * env.etp * copies * h;     // permuted (etp-gathered) tokens: FC1's input
  bytes += (m.ffn_kind == FfnKind::swiglu ? 4.0 : 2.0) * e * copies * f;  // gate/up outputs, activation in/out
  bytes -= (e - li) * copies * f;  // the activation's output (FC2's input) in FP8
  bytes += e * copies * h;         // expert outputs, for the weighted combine's backward
  return bytes;
}

}  // namespace shardplan::simulator
