// Transformer forward pass. Legend: B batch, S sequence (Sx = S/t under sequence parallelism),
// H hidden, t = tp size, nh/nkv local heads (= global / t), hd head dim, V vocabulary.
#include <cmath>

#include <torch/version.h>

#include "attention_gemms.hpp"
#include "autocast.hpp"
#include "executor/errors.hpp"
#include "executor/parallel/mappings.hpp"
#include "executor/parallel/zero_linear.hpp"
#include "ops.hpp"
#include "recompute.hpp"
#include "transformer.hpp"

namespace shardplan::executor {

namespace {

// softmax(Q K^T / sqrt(hd) + causal mask) V in one fused kernel (FlashAttention, Dao et al.
// 2022, or the memory-efficient kernel, picked by LibTorch). q: (B, nh, S, hd), k, v: (B, nkv,
// S, hd) -> (B, S, nh*hd). K and V are repeated per query group (GQA) before the call: the
// enable_gqa flag only exists from LibTorch 2.5 on.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t B = q.size(0), nh = q.size(1), S = q.size(2), hd = q.size(3), group = nh / k.size(1);
  const torch::Tensor kr = group > 1 ? k.repeat_interleave(group, 1) : k;  // query head h uses kv head h / group
  const torch::Tensor vr = group > 1 ? v.repeat_interleave(group, 1) : v;
  const torch::Tensor out = at::scaled_dot_product_attention(q, kr, vr, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                             /*is_causal=*/true);
  return out.transpose(1, 2).reshape({B, S, nh * hd});
#else
  EXECUTOR_CHECK(false, "fused attention needs LibTorch 2");
  return q;
#endif
}

}  // namespace

// The fused kernel runs when the plan asks for it (flash), on CUDA only (the CPU keeps the
// explicit path, bit for bit), and only without attention dropout: SDPA would draw its mask from
// the global CUDA generator, not from the layer's DropoutRng, so masks would no longer be the
// same whatever the layout. It needs LibTorch 2 (scaled_dot_product_attention).
AttentionRun attention_run(const ModelOptions& o) {
  if (!o.fused_attention) return {"eager", ""};
#if TORCH_VERSION_MAJOR >= 2
  if (!o.device.is_cuda()) return {"eager", "the CPU runs the explicit path (the same bits whatever the layout)"};
  if (o.attention_dropout > 0.0)
    return {"eager", "attention dropout: SDPA would draw its masks from the global CUDA generator"};
  return {"flash", ""};
#else
  return {"eager", "LibTorch " TORCH_VERSION " has no scaled_dot_product_attention (LibTorch >= 2)"};
#endif
}

bool Transformer::use_fused_attention(const torch::Tensor& q) const {
  return q.is_cuda() && attention_run(opt_).kind == "flash";
}

torch::Tensor Transformer::norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  constexpr double eps = 1e-5;  // GPT-2 layer_norm_epsilon and Llama-2 rms_norm_eps
  return llama_ ? rms_norm(x, w, eps) : layer_norm(x, w, b, eps);
}

torch::Tensor Transformer::attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const TpContext& ctx) const {
  // q: (B, nh, S, hd), k, v: (B, nkv, S, hd) -> context (B, S, nh*hd)
  const int64_t nh = q.size(1), hd = q.size(3), nkv = k.size(1);
  if (use_fused_attention(q)) return fused_attention(q, k, v);
  // Grouped-query attention without repeating K and V (Ainslie et al. 2023): the nh/nkv query
  // heads sharing a KV head are stacked along the rows (attention_gemms.hpp), so autograd keeps K
  // and V at their own size.
  const int64_t group = nh / nkv;
  // softmax(Q K^T / sqrt(hd) + causal mask) V (Vaswani et al. 2017, §3.2.1)
  const torch::Tensor scores = attention_scores(q, k, /*causal=*/true);  // (B, nkv, g*S, S)
  torch::Tensor probs = causal_softmax(scores, group, 1.0 / std::sqrt(static_cast<double>(hd)), q.scalar_type());
  probs = dropout(probs, opt_.attention_dropout, ctx, /*sharded=*/true);
  return attention_values(probs, v, nh, /*causal=*/true);  // (B, S, nh*hd)
}

torch::Tensor Transformer::context_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const TpContext& ctx) const {
  // q: (B, nh, S, hd), k, v: (B, nkv, S, hd), S this rank's positions -> (B, S, nh*hd)
  const CpContext& cp = opt_.cp;
  if (!cp.active()) return attention_core(q, k, v, ctx);
  const int64_t B = q.size(0), nh = q.size(1), S = q.size(2), hd = q.size(3);
  if (cp.kind == simulator::CpKind::ring)
    return ring_attention(q, k, v, cp, 1.0 / std::sqrt(static_cast<double>(hd)))
        .transpose(1, 2)
        .reshape({B, S, nh * hd});
  // Ulysses: (B, n, S/cp, hd) -> (B, n/cp, S, hd) each, attention over the whole sequence, back.
  const torch::Tensor ctx_h = attention_core(seq_to_heads(q, cp), seq_to_heads(k, cp), seq_to_heads(v, cp), ctx);
  const int64_t nl = nh / cp.size(), S_all = S * cp.size();
  const torch::Tensor back = heads_to_seq(ctx_h.view({B, S_all, nl, hd}).transpose(1, 2), cp);  // (B, nh, S, hd)
  return back.transpose(1, 2).reshape({B, S, nh * hd});
}

torch::Tensor Transformer::attention(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const {
  const int64_t hd = spec_.head_dim;
  const int64_t nh = spec_.num_heads / opt_.tp, nkv = spec_.num_kv_heads / opt_.tp;
  torch::Tensor q, k, v;  // (B, S, n*hd)
  if (blk.qkv.has_base()) {
    const torch::Tensor qkv = blk.qkv.forward(x, ctx);  // (B, S, (nh + 2 nkv) hd)
    q = qkv.narrow(-1, 0, nh * hd);
    k = qkv.narrow(-1, nh * hd, nkv * hd);
    v = qkv.narrow(-1, (nh + nkv) * hd, nkv * hd);
  } else {
    const auto qkv = column_forward({&blk.q, &blk.k, &blk.v}, x, ctx);  // one gather under SP
    q = qkv[0];
    k = qkv[1];
    v = qkv[2];
  }
  const int64_t B = q.size(0), S = q.size(1);
  q = q.view({B, S, nh, hd}).transpose(1, 2);  // (B, nh, S, hd)
  k = k.view({B, S, nkv, hd}).transpose(1, 2);
  v = v.view({B, S, nkv, hd}).transpose(1, 2);
  if (spec_.positional == simulator::PositionalKind::rotary) {
    const int64_t rot = spec_.rotary_dim > 0 ? spec_.rotary_dim : hd;
    // Context parallelism: rotated at this rank's positions of the whole sequence, before any exchange.
    const int64_t total = S * opt_.cp.size();
    const torch::Tensor pos = opt_.cp.active() ? cp_positions(total, opt_.cp, q.device()) : torch::Tensor();
    q = rotary(q, rot, pos, total);
    k = rotary(k, rot, pos, total);
  }
  torch::Tensor context;
  if (opt_.recompute == simulator::Recompute::selective) {
    // Selective recomputation: only q, k, v are kept; scores, probabilities and the dropout
    // mask (the S^2 terms) are recomputed in backward.
    const TpContext base = ctx;
    const RecomputeFn core = [this, base](const std::vector<torch::Tensor>& in, DropoutRng* rng) {
      TpContext c = base;
      c.rng = rng;
      return std::vector<torch::Tensor>{context_attention(in[0], in[1], in[2], c)};
    };
    context = checkpoint(core, {q, k, v}, ctx.rng, opt_.offload_activations)[0];
  } else {
    context = context_attention(q, k, v, ctx);
  }
  return blk.out.forward(context, ctx);  // (B, Sx, H)
}

torch::Tensor Transformer::mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const {
  if (spec_.ffn_kind == simulator::FfnKind::swiglu) {              // Shazeer 2020, "GLU Variants", §2
    const auto gu = column_forward({&blk.gate, &blk.up}, x, ctx);  // (B, S, F/t) each, one gather under SP
    const torch::Tensor& g = gu[0];
    const torch::Tensor& u = gu[1];
    return blk.down.forward(swiglu(g, u), ctx);
  }
  const torch::Tensor a = gelu_tanh(blk.fc.forward(x, ctx));
  return blk.down.forward(a, ctx);
}

torch::Tensor Transformer::block_forward(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const {
  const bool sp = ctx.sequence_parallel && opt_.tp > 1;
  // x: (B, Sx, H); the residual stream is replicated over tp (or sequence-split under SP).
  torch::Tensor h = x + dropout(attention(blk, norm(x, blk.norm1_w, blk.norm1_b), ctx), opt_.hidden_dropout, ctx, sp);
  const torch::Tensor hn = norm(h, blk.norm2_w, blk.norm2_b);
  return h + dropout(blk.moe ? moe_mlp(blk, hn, ctx) : mlp(blk, hn, ctx), opt_.hidden_dropout, ctx, sp);
}

torch::Tensor Transformer::embed(const ModelChunk& c, const torch::Tensor& ids, TpContext& ctx, UnitHooks* hooks) {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel && opt_.tp > 1;
  EXECUTOR_CHECK(!sp || ids.size(1) % opt_.tp == 0, "sequence length must divide by tp under sequence parallelism");
  if (ctx.rng) ctx.rng->reseed(0);
  if (hooks)
    for (int u : c.embedding_units) hooks->before_forward(u);
  torch::Tensor x = wte_.forward(ids, ctx);  // (B, Sx, H)
  if (wpe_.defined()) {
    const int64_t Sx = x.size(1), first = sp ? tp.rank() * Sx : 0;
    if (opt_.cp.active()) {  // this rank's positions of the whole sequence (its SP slice of them)
      const torch::Tensor pos = cp_positions(ids.size(1) * opt_.cp.size(), opt_.cp, x.device()).narrow(0, first, Sx);
      x = x + wpe_.index_select(0, pos);
    } else {
      x = x + wpe_.narrow(0, first, Sx);
    }
  }
  // Under bf16 autocast the residual stream is kept in bf16 too (as with Megatron's bf16
  // activations), not promoted to fp32 by the fp32 embedding.
  if (const auto dt = autocast_dtype(x.device().type())) x = x.to(*dt);
  x = dropout(x, opt_.hidden_dropout, ctx, sp);
  if (hooks)
    for (auto it = c.embedding_units.rbegin(); it != c.embedding_units.rend(); ++it) {
      x = hooks->wrap_output(*it, x);
      hooks->after_forward(*it);
    }
  // With a frozen embedding (LoRA) the residual stream would not require grad: make it a leaf
  // that does, so every block's backward (and its ZeRO-3 bookkeeping) runs.
  if (!x.requires_grad()) x = x.detach().requires_grad_(true);
  return x;
}

ChunkOutput Transformer::head(const ModelChunk& c, torch::Tensor x, const torch::Tensor& labels, TpContext& ctx,
                              UnitHooks* hooks) {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel && opt_.tp > 1;
  if (ctx.rng) ctx.rng->reseed(spec_.num_layers + 1);
  const bool shares_embedding_unit = !c.embedding_units.empty() && c.head_units[0] == c.embedding_units[0];
  if (hooks)
    for (int u : c.head_units) {
      hooks->before_forward(u);
      if (!shares_embedding_unit) x = hooks->wrap_input(u, x);
    }
  x = norm(x, final_w_, final_b_);
  const torch::Tensor xin = sp ? gather_from_seq(x, tp) : copy_to_tp(x, tp);  // (B, S, H)
  const torch::Tensor& head = lm_head_.defined() ? lm_head_ : wte_.weight;    // (V_pad/t, H)
  // An untied head's gradient goes straight into its flat buffer (zero_linear.hpp); a tied one
  // meets the embedding's in autograd, as stage_memory.cpp counts it.
  torch::Tensor logits = zero_linear(xin, head, {}, /*into_grad=*/lm_head_.defined());  // (B, S, V_pad/t)
  torch::Tensor losses = vocab_parallel_cross_entropy(logits.view({-1, logits.size(-1)}), labels.reshape({-1}),
                                                      wte_.start, wte_.valid, tp);  // (B S)
  ChunkOutput out;
  out.loss_sum = losses.sum();
  if (hooks)
    for (auto it = c.head_units.rbegin(); it != c.head_units.rend(); ++it) {
      out.loss_sum = hooks->wrap_output(*it, out.loss_sum);
      hooks->after_forward(*it);
    }
  out.tokens = labels.ne(-100).sum().item<int64_t>();
  return out;
}

ChunkOutput Transformer::forward_chunk(int chunk, const torch::Tensor& input, const torch::Tensor& labels,
                                       TpContext& ctx, UnitHooks* hooks) {
  const ModelChunk& c = chunks_.at(static_cast<size_t>(chunk));
  torch::Tensor x = c.first ? embed(c, input, ctx, hooks) : input;  // (B, Sx, H)
  // Megatron's block method: the first recompute_num_layers blocks of the chunk (0: all of them).
  // (Every N-th block, recompute_every, is refused before the model is built: run/trainer.cpp.)
  const int recomputed = simulator::recomputed_blocks(opt_.recompute, opt_.recompute_num_layers, 0, c.layers);
  for (int i = 0; i < c.layers; ++i) {
    const Block& blk = blocks_[static_cast<size_t>(c.block_begin + i)];
    const bool full = i < recomputed;
    if (ctx.rng) ctx.rng->reseed(blk.layer + 1);
    // An MoE block's routed experts are a unit of their own (expert_unit), managed alongside.
    const std::vector<int> units =
        blk.expert_unit >= 0 ? std::vector<int>{blk.unit, blk.expert_unit} : std::vector<int>{blk.unit};
    if (hooks)
      for (int u : units) {
        hooks->before_forward(u);
        x = hooks->wrap_input(u, x);
      }
    if (full) {
      // Full recomputation: the block keeps only its input; its inside is recomputed in backward.
      const TpContext base = ctx;
      const RecomputeFn fn = [this, &blk, base](const std::vector<torch::Tensor>& in, DropoutRng* rng) {
        TpContext cx = base;
        cx.rng = rng;
        return std::vector<torch::Tensor>{block_forward(blk, in[0], cx)};
      };
      x = checkpoint(fn, {x}, ctx.rng, opt_.offload_activations)[0];
    } else {
      x = block_forward(blk, x, ctx);
    }
    if (hooks)
      for (auto u = units.rbegin(); u != units.rend(); ++u) {
        x = hooks->wrap_output(*u, x);
        hooks->after_forward(*u);
      }
  }
  if (c.last) return head(c, x, labels, ctx, hooks);
  ChunkOutput out;
  out.activation = x;
  return out;
}

}  // namespace shardplan::executor
