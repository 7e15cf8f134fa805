// Legend (per micro-batch, one tensor-parallel rank):
//   s this rank's sequence length (s_full/cp), b micro-batch, M = s*b tokens, h hidden, a heads, g KV heads,
//   d head_dim, f ffn hidden, V vocab, t tp degree, e bytes per activation element,
//   rep = 1/t with sequence parallelism (else 1): the share of the replicated (non-TP) region.
// Shapes: x: (M, h*rep) entering a block; q: (M, a*d/t); k, v: (M, g*d/t); scores: (b*a/t, s, s).
#include "layer_cost.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "context_parallel.hpp"
#include "efficiency_fit.hpp"
#include "errors.hpp"
#include "moe_cost.hpp"
#include "op_sac.hpp"

namespace shardplan::simulator {
namespace {

// Under a causal mask FlashAttention-2 skips the blocks above the diagonal, about half of the
// work (Dao 2023, §3.1.1; its §4.1 counts causal FLOPs as half the full count).
constexpr double kCausalExecutedFraction = 0.5;

struct Acc {
  double fwd_s = 0, bwd_s = 0, fwd_flops = 0, bwd_flops = 0;
  double wgrad_s = 0, wgrad_flops = 0;  // of bwd: the weight-gradient GEMMs (a split backward's W)
  double kernel_recompute_flops = 0;    // recomputed inside a backward kernel (flash: S = Q K^T)
  // The block's last linear's forward (GEMM, weight cast): what a recompute that stops early skips.
  double last_linear_fwd_s = 0, last_linear_fwd_flops = 0;
};

// The GEMM time of a linear's n output columns: its own GEMM, or its share of one `fused_n`
// columns wide (a fused projection, Fusion::megatron), each at its precision's rate.
double linear_gemm_s(const CostEnv& env, double m, double k, double n, double fused_n, bool fp8) {
  auto time = [&](double cols) { return fp8 ? fp8_gemm_time_s(env, m, k, cols) : gemm_time_s(env, m, k, cols); };
  return fused_n > n ? time(fused_n) * (n / fused_n) : time(n);
}

// A linear layer: forward GEMM, backward dgrad (+ wgrad when the weight trains). Returns the
// forward GEMM's time. `fused_n`: the width of the fused GEMM it runs in (0: none).
double linear(const CostEnv& env, Acc& a, double m, double k, double n, bool trainable, double fused_n = 0) {
  const double t = linear_gemm_s(env, m, k, n, fused_n, false);
  const double flops = 2.0 * m * k * n;
  a.fwd_s += t;
  a.fwd_flops += flops;
  a.bwd_s += trainable ? 2 * t : t;
  a.bwd_flops += trainable ? 2 * flops : flops;
  if (trainable) a.wgrad_s += t, a.wgrad_flops += flops;  // dW = dY^T X: the forward GEMM's shape
  return t;
}

// FP8 quantisation (NVIDIA Transformer Engine's cast-transpose kernels): a 16-bit tensor is read
// and written as an FP8 copy plus its FP8 transpose (Hopper's FP8 GEMMs take only the TN layout,
// so dgrad and wgrad need the transposed operand); current (tensorwise) scaling first reads the
// tensor once more for its amax. Bytes for `elements` read at `read_bytes` each.
double fp8_cast_bytes(const CostEnv& env, double elements, double read_bytes) {
  const double amax_pass = env.fp8 == Fp8Recipe::tensorwise ? read_bytes : 0.0;
  return elements * (read_bytes + amax_pass + 2.0);
}

// A block linear in FP8 (hybrid format: e4m3 input and weight forward, e5m2 output gradient in
// backward; Micikevicius et al. 2022, §4): the three GEMMs at the FP8 rate, the input cast in
// forward (`input_elements`; 0 when the previous linear's cast of the same input serves, as a
// fused QKV or gate/up projection does), the output gradient's in backward, the weight's once per
// cached step. The delayed recipe's amax all-reduce (one small buffer per micro-batch) is
// asynchronous in TE and not timed. Returns the forward GEMM's time.
double fp8_linear(const CostEnv& env, Acc& a, double m, double k, double n, bool trainable, double input_elements,
                  double fused_n = 0) {
  const double t = linear_gemm_s(env, m, k, n, fused_n, true);
  const double flops = 2.0 * m * k * n;
  a.fwd_s += t + env.fp8_weight_casts * memory_time_s(env, fp8_cast_bytes(env, k * n, env.fp8_weight_bytes));
  if (input_elements > 0) a.fwd_s += memory_time_s(env, fp8_cast_bytes(env, input_elements, env.act_bytes));
  a.fwd_flops += flops;
  a.bwd_s += (trainable ? 2 * t : t) + memory_time_s(env, fp8_cast_bytes(env, m * n, env.act_bytes));
  a.bwd_flops += trainable ? 2 * flops : flops;
  if (trainable) a.wgrad_s += t, a.wgrad_flops += flops;
  return t;
}

// Batched GEMM of the attention core (scores or attention over values); backward = 2x.
void attention_gemm(const CostEnv& env, Acc& a, double batch, double m, double k, double n) {
  const double t = gemm_time_s(env, m, k, n, batch);
  const double flops = 2.0 * batch * m * k * n;
  a.fwd_s += t;
  a.fwd_flops += flops;
  a.bwd_s += 2 * t;
  a.bwd_flops += 2 * flops;
}

// Memory-bound op; its backward reads the incoming gradient and what it saved: ~2x the bytes.
void elementwise(const CostEnv& env, Acc& a, double bytes) {
  a.fwd_s += memory_time_s(env, bytes);
  a.bwd_s += memory_time_s(env, 2 * bytes);
}

// One of the model's non-GEMM ops over `elements`: its measured cost when the profile has one
// (op_costs.hpp), else the memory roofline over `roofline_bytes` (backward ~2x the bytes).
void model_op(const CostEnv& env, Acc& a, OpKind k, double elements, double roofline_bytes) {
  if (const OpCost* c = env.hw->device.op_cost(env.precision, k)) {
    a.fwd_s += c->forward_s(elements);
    a.bwd_s += c->backward_s(elements, env.warm_backward_fraction);
  } else {
    elementwise(env, a, roofline_bytes);
  }
}

OpKind norm_op(const ModelSpec& m) { return m.norm_kind == NormKind::rmsnorm ? OpKind::rms_norm : OpKind::layer_norm; }

bool measured(const CostEnv& env, OpKind k) { return env.hw->device.op_cost(env.precision, k) != nullptr; }

// Autocast mixed precision (measured profiles only): a linear casts its fp32 weight to the
// compute dtype in forward and again in backward, and a trained weight's gradient back to fp32.
void weight_cast(const CostEnv& env, Acc& a, double weight_elements, bool trainable) {
  if (!env.casts_weights) return;
  const OpCost* c = env.hw->device.op_cost(env.precision, OpKind::weight_cast);
  if (c == nullptr) return;
  a.fwd_s += c->forward_s(weight_elements);
  a.bwd_s += trainable ? c->backward_s(weight_elements) : c->forward_s(weight_elements);
}

double tp_all_reduce(const CostEnv& env, double bytes) {
  return all_reduce_s(bytes, env.tp_group, *env.hw, env.devices_per_node);
}

// A collective of `comm_s` pipelined with a GEMM of `gemm_s` in t chunks (TE userbuffers' ring
// exchange / pipelined reduce-scatter, one chunk per tp rank): max(comm, gemm) + the one chunk of
// the shorter that cannot overlap; the part beyond the GEMM's own time is exposed.
double overlapped_comm_s(double comm_s, double gemm_s, double t) {
  return std::max(0.0, comm_s - gemm_s) + std::min(comm_s, gemm_s) / t;
}

// Under Fusion::megatron, the width of the fused GEMM linear i runs in: its run of neighbours over
// the same input (q, k, v -> linear_qkv; gate, up -> linear_fc1), summed on this tp rank; 0 for a
// linear that runs alone.
double fused_width(const CostEnv& env, std::size_t i) {
  const std::vector<LinearDesc>& v = *env.linears;
  if (env.fusion != Fusion::megatron) return 0.0;
  std::size_t first = i, last = i;
  while (first > 0 && columns_share_input(v, first - 1)) --first;
  while (columns_share_input(v, last)) ++last;
  double width = 0;
  for (std::size_t j = first; j <= last; ++j) width += v[j].d_out_local(env.tp);
  return last > first ? width : 0.0;
}

// LoRA adapter on one linear: dropout(x) @ A^T @ B^T * alpha/r, added to the base output.
void lora_adapter(const CostEnv& env, Acc& a, const LinearDesc& lin) {
  const double M = env.s * env.b, t = env.tp, e = env.act_bytes, r = env.lora_rank;
  const double d_in = lin.d_in_local(t), d_out = lin.d_out_local(t);
  if (env.lora_dropout > 0) model_op(env, a, OpKind::dropout, M * d_in, (2 * e + 1) * M * d_in);
  linear(env, a, M, d_in, r, true);
  linear(env, a, M, r, d_out, true);
  weight_cast(env, a, r * (d_in + d_out), true);
  elementwise(env, a, 3 * e * M * d_out);  // scale and add to the base output
}

// The attention core, eager: scores, softmax, dropout, attention over values. This rank's s
// queries against s_full keys (s_full = s without context parallelism; Ulysses: a/cp heads over
// the whole sequence, the same b·a·s·s_full elements).
void eager_attention_core(const CostEnv& env, Acc& a) {
  const ModelSpec& m = *env.model;
  const double heads = m.num_heads / env.tp, s = env.s, sk = env.s_full, d = m.head_dim, e = env.act_bytes;
  const double batch = env.b * heads;
  if (const OpCost* c = env.hw->device.op_cost(env.precision, OpKind::attention_gemms)) {
    const double flops = 4.0 * batch * s * sk * d;  // both forward GEMMs; backward does twice that
    a.fwd_s += c->forward_s(flops) / env.kernel_efficiency;
    a.bwd_s += c->backward_s(flops, env.warm_backward_fraction) / env.kernel_efficiency;
    a.fwd_flops += flops;
    a.bwd_flops += 2 * flops;
  } else {
    attention_gemm(env, a, batch, s, d, sk);  // q @ k^T: (b*a/t, s, s_full)
    attention_gemm(env, a, batch, s, sk, d);  // p @ v: (b*a/t, s, d)
  }
  model_op(env, a, OpKind::causal_softmax, batch * s * sk, 2 * e * batch * s * sk);  // scale + mask + softmax
  if (m.attention_dropout > 0) model_op(env, a, OpKind::dropout, batch * s * sk, (2 * e + 1) * batch * s * sk);
}

// Flash attention where no fused kernel runs it (DeviceProfile::fused_attention false: shardrun on
// a CPU): the same algorithm as separate ops, priced by the measured ops. Forward: the scores and
// values GEMMs and a softmax pass (log-sum-exp, exp) over the executed scores; backward: the four
// GEMMs and softmax's backward, plus the scores GEMM and exp again from the kept log-sum-exp
// (Dao 2023, Algorithm 2). The executed fraction: a load-balanced causal ring (each rank holds
// chunks i and 2cp-1-i) runs its diagonal block whole and masks it, and half of every other
// block: (1 + (cp - 1) / 2) / cp of the s x s_full scores; without a ring, all of them.
// nullopt when the profile lacks those ops.
std::optional<AttentionTime> unfused_flash_attention_time(const CostEnv& env) {
  const OpCost* gemms = env.hw->device.op_cost(env.precision, OpKind::attention_gemms);
  const OpCost* softmax = env.hw->device.op_cost(env.precision, OpKind::causal_softmax);
  if (!gemms || !softmax) return std::nullopt;
  const double ring = env.cp > 1 && env.cp_kind == CpKind::ring ? env.cp : 1.0;
  const double executed = env.causal ? (1.0 + (ring - 1.0) / 2.0) / ring : 1.0;
  const double elements = score_elements(env) * executed;
  const double flops = attention_flops(env).model_forward * executed;
  const double gemms_fwd = gemms->forward_s(flops) / env.kernel_efficiency, softmax_fwd = softmax->forward_s(elements);
  const double recompute = gemms_fwd / 2 + softmax_fwd;  // the scores GEMM and the exps again
  const double warm = env.warm_backward_fraction;
  return AttentionTime{gemms_fwd + softmax_fwd, gemms->backward_s(flops, warm) / env.kernel_efficiency +
                                                    softmax->backward_s(elements, warm) + recompute};
}

// The attention core as one fused kernel per pass (flash): mask, softmax and dropout inside it.
void flash_attention_core(const CostEnv& env, Acc& a) {
  const AttentionFlops f = attention_flops(env);
  const AttentionTime t = flash_attention_time(env);
  a.fwd_s += t.forward_s;
  a.bwd_s += t.backward_s;
  a.fwd_flops += f.model_forward;
  a.bwd_flops += f.model_backward;
  a.kernel_recompute_flops += f.model_forward / 2;  // S = Q K^T again in backward (conventional count)
}

void attention_core(const CostEnv& env, Acc& a) {
  if (fused(env.attention)) flash_attention_core(env, a);
  else eager_attention_core(env, a);
}

}  // namespace

// The SP region a block linear reads, in block order: attention in (0), attention out (1), MLP in
// (2), MLP out (3); `rows_seen` counts the row-parallel linears before it and is advanced.
int linear_region(const LinearDesc& lin, int& rows_seen) {
  const int region = std::min(3, 2 * rows_seen + (lin.split == TpSplit::row ? 1 : 0));
  if (lin.split == TpSplit::row) ++rows_seen;
  return region;
}

double score_elements(const CostEnv& env) {
  // b·(a/t)·s·s_full: this rank's s/cp queries against all s_full keys.
  double elements = env.b * (env.model->num_heads / env.tp) * env.s * env.s_full;
  // Packed documents of l tokens (THD / varlen kernels): s/l blocks of l x l instead of s x s.
  if (env.doc_tokens > 0 && env.doc_tokens < env.s_full) elements *= env.doc_tokens / env.s_full;
  return elements;
}

AttentionFlops attention_flops(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const double d_v = m.mla.enabled() ? m.mla.v_head_dim : m.head_dim;
  AttentionFlops f;
  // Q K^T and P V: 2·s·s_kv·(d + d_v) per head and score.
  f.model_forward = 2.0 * score_elements(env) * (m.head_dim + d_v);
  f.model_backward = 2 * f.model_forward;
  if (env.attention == AttentionKind::eager) {
    f.executed_forward = f.model_forward;
    f.executed_backward = f.model_backward;
    return f;
  }
  f.executed_forward = f.model_forward * (env.causal ? kCausalExecutedFraction : 1.0);
  f.executed_backward = 2.5 * f.executed_forward;  // Dao 2023, §4.1: 5 matmuls in backward vs 2 forward
  return f;
}

AttentionTime flash_attention_time(const CostEnv& env) {
  if (!env.hw->device.fused_attention)
    if (const std::optional<AttentionTime> t = unfused_flash_attention_time(env)) return *t;
  const ModelSpec& m = *env.model;
  const DeviceProfile& dev = env.hw->device;
  const double heads = m.num_heads / env.tp;
  const double s = env.s, d = m.head_dim, e = env.act_bytes, M = env.s * env.b;
  const AttentionFlops f = attention_flops(env);
  // Forward reads Q, K, V, writes O and the fp32 log-sum-exp; backward reads Q, K, V, O, dO and
  // the LSE, writes the fp32 row sums D = rowsum(dO * O) and dQ, dK, dV (Dao 2023, Algorithms 1-2).
  // A ring (context parallel) reads every rank's K, V block in turn: cp times this rank's.
  const double kv_reads = env.cp > 1 && env.cp_kind == CpKind::ring ? env.cp : 1.0;
  const double q = e * M * heads * d, kv = kv_reads * e * M * (m.kv_dim() + m.v_dim()) / (2 * env.tp);
  const double lse = 4.0 * env.b * heads * s;
  const double fwd_bytes = 2 * q + 2 * kv + lse;
  const double bwd_bytes = 4 * q + 4 * kv + 2 * lse;
  // The kernel's sequence length: a ring step runs s/cp queries against an s/cp block; Ulysses
  // runs a/cp heads over the whole sequence.
  double s_kernel = env.cp > 1 && env.cp_kind == CpKind::all_to_all ? env.s_full : s;
  if (env.doc_tokens > 0) s_kernel = std::min(s_kernel, env.doc_tokens);  // each document its own block
  double eff_fwd = 0, eff_bwd = 0;
  if (!dev.flash_attention.empty() && env.precision != Precision::fp32) {
    eff_fwd = dev.flash_attention.at(env.causal, d, s_kernel, /*backward=*/false);
    eff_bwd = dev.flash_attention.at(env.causal, d, s_kernel, /*backward=*/true);
  } else {  // no curve (or fp32, where no flash kernel runs): one of its batched GEMMs, as executed
    const double gemm_flops = 2.0 * env.b * heads * s * s_kernel * d * (f.executed_forward / f.model_forward);
    eff_fwd = eff_bwd = env.gemm_curve->at(gemm_flops);
  }
  if (env.attention == AttentionKind::flash1) {  // FlashAttention v1 / Triton: the FA2 rate, slowed
    eff_fwd /= dev.flash_attention_v1_slowdown.forward;
    eff_bwd /= dev.flash_attention_v1_slowdown.backward;
  }
  auto pass = [&](double flops, double eff, double bytes) {
    const double compute = flops / (env.peak_flops * eff * env.kernel_efficiency);
    const double memory = bytes / (dev.memory_bandwidth_Bps * dev.memory_efficiency.at(bytes));
    return std::max(compute, memory) + dev.kernel_launch_s;
  };
  return {pass(f.executed_forward, eff_fwd, fwd_bytes), pass(f.executed_backward, eff_bwd, bwd_bytes)};
}

double gemm_time_s(const CostEnv& env, double m, double k, double n, double batch) {
  const DeviceProfile& dev = env.hw->device;
  const double flops = 2.0 * batch * m * k * n;
  const double bytes = env.act_bytes * batch * (m * k + k * n + m * n);
  const double compute = flops / (env.peak_flops * env.gemm_curve->at(flops) * env.kernel_efficiency);
  // A CPU BLAS packs its operands between the FMA loops (Goto & van de Geijn 2008, Sec. 4): those
  // streamed from DRAM add (efficiency_fit.hpp, streamed_operand_bytes); a GPU overlaps them.
  if (dev.gemm_operand_stream_Bps > 0) {
    const double e = env.act_bytes * batch;
    const double streamed = streamed_operand_bytes({e * m * k, e * k * n, e * m * n}, env.cache_share_bytes);
    return compute + streamed / dev.gemm_operand_stream_Bps + dev.kernel_launch_s;
  }
  const double memory = bytes / (dev.memory_bandwidth_Bps * dev.memory_efficiency.at(bytes));
  return std::max(compute, memory) + dev.kernel_launch_s;
}

double block_gemm_time_s(const CostEnv& env, double m, double k, double n) {
  return env.fp8 != Fp8Recipe::none ? fp8_gemm_time_s(env, m, k, n) : gemm_time_s(env, m, k, n);
}

double fp8_gemm_time_s(const CostEnv& env, double m, double k, double n) {
  const DeviceProfile& dev = env.hw->device;
  const double flops = 2.0 * m * k * n;
  const double bytes = (m * k + k * n) + env.act_bytes * m * n;  // 1-byte operands, 16-bit output
  const double compute = flops / (env.fp8_peak_flops * env.fp8_gemm_curve->at(flops) * env.kernel_efficiency);
  const double memory = bytes / (dev.memory_bandwidth_Bps * dev.memory_efficiency.at(bytes));
  return std::max(compute, memory) + dev.kernel_launch_s;
}

double memory_time_s(const CostEnv& env, double bytes) {
  const DeviceProfile& dev = env.hw->device;
  return bytes / (dev.memory_bandwidth_Bps * dev.memory_efficiency.at(bytes)) + dev.kernel_launch_s;
}

CostEnv make_cost_env(const ModelSpec& m, const ClusterSpec& c, const ParallelConfig& cfg,
                      const std::vector<LinearDesc>& linears, const std::vector<char>& lora_mask,
                      const BlockGroups& groups, const std::vector<LinearDesc>* expert_linears) {
  CostEnv env;
  env.model = &m;
  env.hw = &c.hardware;
  env.devices_per_node = c.per_node();
  env.cache_share_bytes = c.hardware.device.last_level_cache_bytes / std::max(1, env.devices_per_node);
  env.tp_group = groups.tp;
  env.cp_group = groups.cp;
  env.ep_group = groups.ep;
  env.etp_group = groups.etp;
  env.cp = cfg.cp;
  env.cp_kind = cfg.cp_kind;
  env.s_full = cfg.seq_len;
  env.s = static_cast<double>(cfg.seq_len) / cfg.cp;
  env.doc_tokens = cfg.packed_document_tokens;
  env.moe = m.is_moe() && expert_linears != nullptr;
  env.ep = cfg.ep;
  env.etp = cfg.expert_tp();
  env.moe_capacity_factor = cfg.moe_capacity_factor;
  env.expert_linears = expert_linears;
  env.b = cfg.micro_batch_size;
  env.tp = cfg.tp;
  env.sp = cfg.sequence_parallel && cfg.tp > 1;
  env.tp_overlap = env.sp && cfg.tp_comm_overlap;
  env.recompute = cfg.recompute;
  env.recompute_stops_early = cfg.framework.recompute_stops_early;
  env.attention = cfg.attention;
  env.fusion = cfg.fusion;
  env.causal = m.kind == ModelKind::decoder;
  env.precision = cfg.precision;
  env.casts_weights = cfg.casts_weights();
  env.act_bytes = cfg.precision == Precision::fp32 ? 4.0 : 2.0;
  env.peak_flops = c.hardware.device.peak(cfg.precision);
  env.gemm_curve = &c.hardware.device.gemm_curve(cfg.precision);
  env.kernel_efficiency = cfg.framework.compute_efficiency;
  env.fp8 = cfg.fp8;
  if (cfg.uses_fp8()) {
    env.fp8_peak_flops = c.hardware.device.peak_fp8_flops;
    env.fp8_gemm_curve = &c.hardware.device.fp8_gemm_curve();
    env.fp8_weight_casts = cfg.zero_stage == 3 ? 1.0 : 1.0 / std::max(1, cfg.micro_batches());
    env.fp8_weight_bytes = cfg.fp8_param_gather ? 1.0 : 2.0;
  }
  env.lora = cfg.lora.enabled();
  env.nf4_base = cfg.lora.quantized_base();
  env.linears = &linears;
  env.lora_mask = &lora_mask;
  env.lora_rank = cfg.lora.rank;
  env.lora_dropout = cfg.lora.dropout;
  return env;
}

namespace {

// A block's shapes on this rank (see the legend at the top).
struct BlockDims {
  double M, h, t, e, rep;
};

BlockDims block_dims(const CostEnv& env) {
  const double M = env.s * env.b, h = env.model->hidden, t = env.tp, e = env.act_bytes;
  const double rep = env.sp ? 1.0 / t : 1.0;
  return {M, h, t, e, rep};
}

// The dense MLP's hidden width, or an MoE block's shared expert's (0: none).
double block_mlp_hidden(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  return static_cast<double>(env.moe ? m.moe.shared_ffn_hidden : m.ffn_hidden);
}

// The block's linears (+ FP8 casts, autocast weight casts, QLoRA dequantisation, LoRA adapters);
// each one's forward GEMM time is added to its SP region in `region_gemm_s`.
void add_block_linears(const CostEnv& env, Acc& a, double region_gemm_s[4]) {
  const auto [M, h, t, e, rep] = block_dims(env);
  const bool frozen = env.lora;
  int rows_seen = 0;
  for (std::size_t i = 0; i < env.linears->size(); ++i) {
    const LinearDesc& lin = (*env.linears)[i];
    const double d_in = lin.d_in_local(t), d_out = lin.d_out_local(t);
    const double fwd_s_before = a.fwd_s, fwd_flops_before = a.fwd_flops;
    const int region = linear_region(lin, rows_seen);
    if (env.fp8 != Fp8Recipe::none) {
      // A column linear reads the replicated region; with SP it is cast on this rank's 1/t of
      // the tokens and all-gathered in FP8 (TE). Consecutive column linears over the same input
      // (q, k, v; gate, up) share one cast.
      const bool shared = i > 0 && columns_share_input(*env.linears, i - 1);
      const double input = shared ? 0.0 : M * d_in * (lin.split == TpSplit::column ? rep : 1.0);
      region_gemm_s[region] += fp8_linear(env, a, M, d_in, d_out, !frozen, input, fused_width(env, i));
    } else {
      region_gemm_s[region] += linear(env, a, M, d_in, d_out, !frozen, fused_width(env, i));
    }
    weight_cast(env, a, d_in * d_out, !frozen);
    if (env.nf4_base) {  // QLoRA: the NF4 weight dequantised to 16-bit for forward and for dgrad
      const double dequant = memory_time_s(env, d_in * d_out * (kNf4BytesPerWeight + e));
      a.fwd_s += dequant;
      a.bwd_s += dequant;
    }
    if (env.lora && (*env.lora_mask)[i]) {
      lora_adapter(env, a, lin);  // the adapter saves after the base GEMM ran: nothing skipped
    } else if (i + 1 == env.linears->size()) {
      a.last_linear_fwd_s = a.fwd_s - fwd_s_before;
      a.last_linear_fwd_flops = a.fwd_flops - fwd_flops_before;
    }
  }
}

// The ops on q, k and the attention latents: per-head norms, MLA's latent norms, rotary embedding.
void add_qk_ops(const CostEnv& env, Acc& a) {
  const ModelSpec& m = *env.model;
  const auto [M, h, t, e, rep] = block_dims(env);
  if (m.qk_norm) {  // Qwen3: a norm over each head of q and k (M x (q_dim + kv_dim) / t elements)
    const double qk = M * (m.q_dim() + m.kv_dim()) / t;
    model_op(env, a, norm_op(m), qk, 2 * e * qk);
  }
  if (m.mla.enabled()) {  // MLA: norms over the q and kv latents (replicated: every tp rank, all M tokens)
    const double latents = M * (m.mla.q_lora_rank + m.mla.kv_lora_rank);
    model_op(env, a, norm_op(m), latents, 2 * e * latents);
  }
  if (m.positional == PositionalKind::rotary) {
    const double frac = m.rotary_dim > 0 ? static_cast<double>(m.rotary_dim) / m.head_dim : 1.0;
    const double qk = M * (m.q_dim() + m.kv_dim()) / t;  // the op runs over whole heads of q and k
    model_op(env, a, OpKind::rotary, qk, 2 * e * qk * frac);
  }
}

// The dense MLP's (or shared expert's) activation.
void add_mlp_activation(const CostEnv& env, Acc& a) {
  const ModelSpec& m = *env.model;
  const auto [M, h, t, e, rep] = block_dims(env);
  const bool swiglu = m.ffn_kind == FfnKind::swiglu;
  // silu then mul (eager: r/w gate, r gate-act and up, w out), one fused kernel (r gate and up,
  // w out), or gelu (r/w)
  const double act = swiglu ? (fuses_pointwise(env.fusion) ? 3.0 : 5.0) : 2.0;
  const double f_mlp = block_mlp_hidden(env);  // dense MLP or shared expert
  if (f_mlp > 0) model_op(env, a, swiglu ? OpKind::swiglu : OpKind::gelu_tanh, M * f_mlp / t, act * e * M * f_mlp / t);
}

// The framework's host time (measured CPU profiles), then the residual adds and hidden dropout.
void add_host_and_residuals(const CostEnv& env, Acc& a) {
  const ModelSpec& m = *env.model;
  const auto [M, h, t, e, rep] = block_dims(env);
  const PassSeconds host = block_host_overhead_s(env);
  a.fwd_s += host.forward;
  a.bwd_s += host.backward;
  if (m.hidden_dropout > 0 && measured(env, OpKind::dropout)) {
    elementwise(env, a, 2 * 3 * e * M * h * rep);  // the two residual adds
    for (int i = 0; i < 2; ++i) model_op(env, a, OpKind::dropout, M * h * rep, 0);
  } else {
    const double residual = (3 * e + (m.hidden_dropout > 0 ? 1 : 0)) * M * h * rep;  // dropout + add
    elementwise(env, a, 2 * residual);
  }
}

struct BlockTpComm {
  double forward_s = 0, backward_s = 0;
  double last_reduce_forward_s = 0;  // of forward_s: the reduce after the block's last linear
};

// Megatron f/g pairs: 2 all-reduces (or all-gather + reduce-scatter with SP, same volume) forward
// and backward; a parallel residual sums attention and MLP before one reduce. An MoE block's routed
// experts take the sequence-parallel tokens as they are (the dispatcher moves them): only its
// shared expert, if any, gathers and scatters.
BlockTpComm block_tp_comm(const CostEnv& env, const double region_gemm_s[4]) {
  const ModelSpec& m = *env.model;
  const auto [M, h, t, e, rep] = block_dims(env);
  const bool frozen = env.lora;
  const double reduces = m.parallel_residual || (env.moe && block_mlp_hidden(env) == 0) ? 1.0 : 2.0;
  double tp_comm = t > 1 ? reduces * tp_all_reduce(env, e * M * h) : 0.0;
  double tp_comm_bwd = tp_comm;
  if (env.tp_overlap && !m.parallel_residual) {
    // Each region's all-gather (in) or reduce-scatter (out) is half an all-reduce, pipelined with
    // that region's GEMMs: forward GEMM, backward dgrad (+ wgrad when trained).
    const double half = tp_all_reduce(env, e * M * h) / 2;
    tp_comm = tp_comm_bwd = 0;
    for (int r = 0; r < 2 * static_cast<int>(reduces); ++r) {  // an MoE block without shared expert: attention's two
      tp_comm += overlapped_comm_s(half, region_gemm_s[r], t);
      tp_comm_bwd += overlapped_comm_s(half, frozen ? region_gemm_s[r] : 2 * region_gemm_s[r], t);
    }
  } else if (env.sp && t > 1 && !m.parallel_residual) {
    // Sequence parallelism without userbuffers (Korthikanti et al. 2022, §4.2.2; Megatron-Core
    // LinearWithGradAccumulationAndAsyncCommunication.backward, TE Linear/LayerNormLinear
    // backward): a column region's input is all-gathered again in backward, asynchronously beside
    // its dgrad GEMM, and its input gradient reduce-scattered beside the wgrad GEMM (a frozen
    // weight has none: exposed); the row region's output-gradient all-gather blocks. The link's
    // compute_overlap scales what hides (0 for CPU ranks: shardrun's sp_column_linears re-gather
    // and reduce in line, all exposed).
    const double half = tp_all_reduce(env, e * M * h) / 2, ov = env.hw->node.intra.compute_overlap;
    tp_comm_bwd = 0;
    for (int r = 0; r < 2 * static_cast<int>(reduces); r += 2) {  // column regions: attention in, MLP in
      const double beside_dgrad = exposed_beside(half, region_gemm_s[r], ov);
      tp_comm_bwd += half + beside_dgrad + (frozen ? half : beside_dgrad);
    }
  }
  return {tp_comm, tp_comm_bwd, tp_comm / reduces};
}

// The block's PartCost from its accumulated passes (`a`), the attention core alone, the TP and
// MoE communication; recompute and stored activations by env.recompute.
PartCost assemble_block_cost(const CostEnv& env, const Acc& a, const Acc& attn_core, const BlockTpComm& tp,
                             const MoeLayerCost& moe) {
  PartCost c;
  c.forward_s = a.fwd_s;
  c.backward_s = a.bwd_s;
  c.weight_grad_s = a.wgrad_s;
  c.weight_grad_flops = a.wgrad_flops;
  c.forward_flops = a.fwd_flops;
  c.backward_flops = a.bwd_flops;
  c.tp_comm_forward_s = tp.forward_s;
  c.tp_comm_backward_s = tp.backward_s;
  if (env.cp > 1) {
    // The attention core alone, timed above (context parallelism runs the flash kernel only).
    const CpComm cp = cp_attention_comm(env, AttentionTime{attn_core.fwd_s, attn_core.bwd_s});
    c.cp_comm_forward_s = cp.forward_s;
    c.cp_comm_backward_s = cp.backward_s;
  }
  c.ep_comm_forward_s = moe.comm_forward_s;
  c.ep_comm_backward_s = moe.comm_backward_s;
  if (env.recompute == Recompute::full && env.recompute_stops_early && !env.moe) {
    // Stopped when the last linear (the MLP's down projection) saves its input: neither it nor the
    // TP reduce after it reruns. An MoE block's last saver is the expert combine: all reruns.
    c.recompute_s = a.fwd_s - a.last_linear_fwd_s + c.forward_comm_s() - tp.last_reduce_forward_s;
    c.recompute_flops = a.fwd_flops - a.last_linear_fwd_flops;
  } else if (env.recompute == Recompute::full) {
    c.recompute_s = a.fwd_s + c.forward_comm_s();
    c.recompute_flops = a.fwd_flops;
  } else if (env.recompute == Recompute::selective && env.attention == AttentionKind::eager) {
    c.recompute_s = attn_core.fwd_s;
    c.recompute_flops = attn_core.fwd_flops;
  } else if (env.recompute == Recompute::op_sac) {
    // The whole forward but the kept ops (op_sac.hpp), and its collectives not on the save list:
    // with SP the all-gathers (half the volume; the reduce-scatters are kept), else the all-reduces.
    const OpSacKept kept = op_sac_kept_forward(env, attn_core.fwd_s, attn_core.fwd_flops);
    c.recompute_s = a.fwd_s - kept.forward_s + (env.sp ? 0.5 : 1.0) * c.tp_comm_forward_s;
    c.recompute_flops = a.fwd_flops - kept.forward_flops;
  }
  c.recompute_flops += a.kernel_recompute_flops;  // hardware FLOPs count the flash kernel's own recompute
  c.stored_activation_bytes = block_activation_bytes(env, env.recompute);
  c.full_activation_bytes = block_activation_bytes(env, Recompute::none);
  return c;
}

}  // namespace

PartCost block_cost(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const auto [M, h, t, e, rep] = block_dims(env);
  Acc fwd_attn_core;
  attention_core(env, fwd_attn_core);
  Acc a = fwd_attn_core;
  // Forward GEMM time of the four SP regions' linears: attention in (before the first row-parallel
  // linear), attention out, MLP in, MLP out; each sits next to one all-gather or reduce-scatter.
  double region_gemm_s[4] = {0, 0, 0, 0};
  for (int i = 0; i < m.norms_per_layer; ++i) model_op(env, a, norm_op(m), M * h * rep, 2 * e * M * h * rep);
  add_block_linears(env, a, region_gemm_s);
  add_qk_ops(env, a);
  add_mlp_activation(env, a);
  MoeLayerCost moe;
  if (env.moe) {
    moe = moe_layer_cost(env, !env.lora);
    a.fwd_s += moe.forward_s;
    a.bwd_s += moe.backward_s;
    a.fwd_flops += moe.forward_flops;
    a.bwd_flops += moe.backward_flops;
    a.wgrad_s += moe.weight_grad_s;
    a.wgrad_flops += moe.weight_grad_flops;
  }
  add_host_and_residuals(env, a);
  return assemble_block_cost(env, a, fwd_attn_core, block_tp_comm(env, region_gemm_s), moe);
}

PartCost embedding_cost(const CostEnv& env, bool tied_in_stage) {
  const ModelSpec& m = *env.model;
  const double M = env.s * env.b, h = m.hidden, t = env.tp, e = env.act_bytes, V = m.vocab_size;
  const double rep = env.sp ? 1.0 / t : 1.0;
  Acc a;
  a.fwd_s += memory_time_s(env, 2 * e * M * h);  // gather rows of the (V/t, h) table
  if (m.positional == PositionalKind::learned || m.type_vocab_size > 0) a.fwd_s += memory_time_s(env, 3 * e * M * h);
  if (m.embedding_norm) a.fwd_s += memory_time_s(env, 2 * e * M * h * rep);
  if (!env.lora) {
    // The table's gradient is dense: a zero-filled (V/t, h) tensor, then the rows scatter-added
    // (PyTorch aten/src/ATen/native/Embedding.cpp, embedding_dense_backward_cpu: at::zeros of
    // num_weights x h, then index_add_; the CUDA kernel likewise zero-fills its output).
    a.bwd_s += memory_time_s(env, e * V / t * h) + memory_time_s(env, 3 * e * M * h);
    // A tied table gets two gradients, the LM head's weight gradient and this one, summed by
    // autograd before they reach the parameter (torch/csrc/autograd/input_buffer.cpp, InputBuffer::add:
    // read both, write the sum). Measured with python3-torch 1.13 on this project's VM, one thread,
    // GPT-2's 50257 x 768 table and 128 tokens (2026-11-27): embedding + LM head forward and
    // backward 234 ms tied against 190 ms untied (medians of 6).
    if (tied_in_stage) a.bwd_s += memory_time_s(env, 3 * e * V / t * h);
  }
  if (m.hidden_dropout > 0 && measured(env, OpKind::dropout)) model_op(env, a, OpKind::dropout, M * h * rep, 0);
  PartCost c;
  c.forward_s = a.fwd_s;
  c.backward_s = a.bwd_s;
  // Vocab-parallel embedding: partial sums all-reduced (reduce-scattered with SP).
  c.tp_comm_forward_s = t > 1 ? tp_all_reduce(env, e * M * h) : 0.0;
  if (m.hidden_dropout > 0) c.stored_activation_bytes += M * h * rep;  // dropout mask
  if (m.embedding_norm) c.stored_activation_bytes += e * M * h * rep;
  c.full_activation_bytes = c.stored_activation_bytes;
  return c;
}

PartCost head_cost(const CostEnv& env) {
  const ModelSpec& m = *env.model;
  const double M = env.s * env.b, h = m.hidden, t = env.tp, e = env.act_bytes, V = m.vocab_size;
  const double rep = env.sp ? 1.0 / t : 1.0;
  const bool head_trains = !env.lora;
  Acc a;
  PartCost c;
  if (m.final_norm) {
    model_op(env, a, norm_op(m), M * h * rep, 2 * e * M * h * rep);
    c.stored_activation_bytes += e * M * h * rep;
  }
  if (m.mlm_head) {  // transform: dense + gelu + norm (replicated)
    linear(env, a, M, h, h, head_trains);
    elementwise(env, a, 6 * e * M * h);
    c.stored_activation_bytes += 3 * e * M * h;
  }
  linear(env, a, M, h, V / t, head_trains);  // logits: (M, V/t)
  weight_cast(env, a, h * V / t, head_trains);
  c.stored_activation_bytes += e * M * h * rep;  // LM-head input
  // Vocab-parallel cross-entropy in fp32 (Korthikanti et al. 2022, §4.3: 4sbv/t).
  elementwise(env, a, (e + 4 + 4) * M * V / t);
  c.stored_activation_bytes += 4 * M * V / t;
  c.transient_bytes = e * M * V / t;  // the logits, alive beside the fp32 softmax
  c.forward_s = a.fwd_s;
  c.backward_s = a.bwd_s;
  c.weight_grad_s = a.wgrad_s;
  c.weight_grad_flops = a.wgrad_flops;
  c.forward_flops = a.fwd_flops;
  c.backward_flops = a.bwd_flops;
  if (t > 1) {
    // max, sum-exp and target logit all-reduced (fp32, M each); the input's copy-to-TP-region
    // all-reduces its gradient in backward.
    c.tp_comm_forward_s = 3 * tp_all_reduce(env, 4 * M);
    c.tp_comm_backward_s = tp_all_reduce(env, e * M * h);
  }
  c.full_activation_bytes = c.stored_activation_bytes;
  return c;
}

}  // namespace shardplan::simulator
