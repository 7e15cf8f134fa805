#include "ops.hpp"

#include "cpu_kernels.hpp"

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

namespace shardplan::executor {

namespace {

namespace F = torch::nn::functional;

// The fused CPU loops (cpu_kernels.hpp) take fp32 CPU tensors; anything else runs as LibTorch ops.
bool fused_cpu(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; }

// RMSNorm (Zhang & Sennrich 2019) computed in fp32 as Hugging Face Llama does, as one autograd
// node that saves its input and the (rows, 1) inverse RMS only (like fused RMSNorm kernels),
// instead of the three (rows, H) tensors the op-by-op form keeps. x: (.., H), w: (H)
struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor w, double eps) {
    if (fused_cpu(x) && fused_cpu(w)) {  // one pass (cpu_kernels.hpp); rstd: (rows)
      const torch::Tensor xc = x.contiguous();
      const int64_t H = x.size(-1), rows = x.numel() / H;
      torch::Tensor y = torch::empty_like(xc), rstd = torch::empty({rows}, xc.options());
      const torch::Tensor wc = w.contiguous();
      cpu::rms_norm_forward(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), rstd.data_ptr<float>(),
                            rows, H, static_cast<float>(eps));
      ctx->save_for_backward({xc, wc, rstd});
      ctx->saved_data["fused"] = true;
      return y;
    }
    ctx->saved_data["fused"] = false;
    const torch::Tensor xf = x.to(torch::kFloat);
    const torch::Tensor rstd = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);  // (.., 1)
    ctx->save_for_backward({x, w, rstd});
    return w * (xf * rstd).to(x.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    if (ctx->saved_data["fused"].toBool()) {
      const torch::Tensor gy = g[0].contiguous();
      const int64_t H = x.size(-1), rows = x.numel() / H;
      torch::Tensor dx = torch::empty_like(x), dw;
      if (ctx->needs_input_grad(1)) dw = torch::empty_like(w);
      cpu::rms_norm_backward(gy.data_ptr<float>(), x.data_ptr<float>(), w.data_ptr<float>(), rstd.data_ptr<float>(),
                             dx.data_ptr<float>(), dw.defined() ? dw.data_ptr<float>() : nullptr, rows, H);
      return {dx, dw, torch::Tensor()};
    }
    const torch::Tensor n = x.to(torch::kFloat) * rstd;  // normalised input
    const torch::Tensor gy = g[0].to(torch::kFloat);
    torch::Tensor grad_w;
    if (ctx->needs_input_grad(1)) {
      const torch::Tensor gw_rows = gy * n.to(x.scalar_type()).to(torch::kFloat);
      grad_w = gw_rows.reshape({-1, gw_rows.size(-1)}).sum(0).to(w.scalar_type());
    }
    // d/dx of w * x * rstd: rstd * (gw - n * mean(gw * n)), gw = g * w
    const torch::Tensor gw = gy * w.to(torch::kFloat);
    const torch::Tensor grad_x = rstd * (gw - n * (gw * n).mean(-1, true));
    return {grad_x.to(x.scalar_type()), grad_w, torch::Tensor()};
  }
};

}  // namespace

namespace {

// A few tables per thread, keyed by the shape they serve (a run uses one or two), built once by
// `make`; past eight the oldest goes. Each call site (its `make` type) has its own cache.
template <typename Key, typename Make>
auto per_thread_cached(const Key& key, Make make) {
  using Value = decltype(make());
  thread_local std::vector<std::pair<Key, Value>> cache;
  for (const auto& [k, v] : cache)
    if (k == key) return v;
  if (cache.size() >= 8) cache.erase(cache.begin());
  cache.emplace_back(key, make());
  return cache.back().second;
}

// The cos and sin tables of RoPE for S positions and `rot` dims, built once per (S, rot, dtype,
// device) and thread, as Hugging Face's rotary embedding caches them: every layer's q and k (and
// recomputed blocks) read the same tables instead of rebuilding them (eight small ops each).
std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t S, int64_t rot, torch::ScalarType dt, torch::Device dev) {
  return per_thread_cached(std::make_tuple(S, rot, dt, dev), [&] {
    torch::NoGradGuard no_grad;
    const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(dev);
    const torch::Tensor inv_freq = torch::pow(10000.0, -torch::arange(0, rot, 2, opts) / static_cast<double>(rot));
    const torch::Tensor angles = torch::outer(torch::arange(S, opts), inv_freq);  // (S, rot/2)
    const torch::Tensor emb = torch::cat({angles, angles}, -1);                   // (S, rot)
    return std::make_pair(emb.cos().to(dt), emb.sin().to(dt));
  });
}

// RoPE on fp32 CPU tensors as one autograd node: one pass forward into a contiguous (B, n, S, hd)
// output, one pass backward (the inverse rotation) into a gradient laid out as x is (so the
// transpose and view before it stay free); nothing saved but the tables. x: (B, n, S, hd)
struct RotaryCpu : torch::autograd::Function<RotaryCpu> {
  static cpu::HeadView view(const torch::Tensor& t) {
    return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.stride(2)};
  }
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor cos,
                               torch::Tensor sin, int64_t rot) {
    const torch::Tensor xs = x.stride(3) == 1 ? x : x.contiguous();
    torch::Tensor y = torch::empty(x.sizes(), x.options());
    cpu::rotary(view(xs), view(y), cos.data_ptr<float>(), sin.data_ptr<float>(), x.size(0), x.size(1), x.size(2),
                x.size(3), rot, /*inverse=*/false);
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["rot"] = rot;
    ctx->saved_data["sizes"] = x.sizes().vec();
    // The gradient in x's own layout when that is a permutation of a dense one (q.view().transpose()).
    ctx->saved_data["strides"] = x.is_non_overlapping_and_dense() ? x.strides().vec() : y.strides().vec();
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor gy = g[0].stride(3) == 1 ? g[0] : g[0].contiguous();
    torch::Tensor dx = torch::empty_strided(ctx->saved_data["sizes"].toIntVector(),
                                            ctx->saved_data["strides"].toIntVector(), gy.options());
    cpu::rotary(view(gy), view(dx), saved[0].data_ptr<float>(), saved[1].data_ptr<float>(), dx.size(0), dx.size(1),
                dx.size(2), dx.size(3), ctx->saved_data["rot"].toInt(), /*inverse=*/true);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

// RoPE, rotate-half form (Su et al. 2021 "RoFormer", §3.4; Hugging Face Llama). x: (B, n, S, hd)
// at positions 0..S-1, or at `positions` (S) of a sequence of `total` when defined (context
// parallelism).
torch::Tensor rotary(const torch::Tensor& x, int64_t rot, const torch::Tensor& positions, int64_t total) {
  if (!positions.defined() && fused_cpu(x)) {
    auto [cos, sin] = rope_tables(x.size(2), rot, torch::kFloat, x.device());
    return RotaryCpu::apply(x, cos, sin, rot);
  }
  auto [cos, sin] = rope_tables(positions.defined() ? total : x.size(2), rot, x.scalar_type(), x.device());
  if (positions.defined()) {  // the tables of the whole sequence, rows at this rank's positions
    cos = cos.index_select(0, positions);
    sin = sin.index_select(0, positions);
  }
  const torch::Tensor xr = x.narrow(-1, 0, rot);
  const torch::Tensor x1 = xr.narrow(-1, 0, rot / 2), x2 = xr.narrow(-1, rot / 2, rot / 2);
  const torch::Tensor rotated = xr * cos + torch::cat({-x2, x1}, -1) * sin;
  if (rot == x.size(-1)) return rotated;
  return torch::cat({rotated, x.narrow(-1, rot, x.size(-1) - rot)}, -1);
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) { return RmsNorm::apply(x, w, eps); }

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, double eps) {
  const auto dt = x.scalar_type();
  return F::layer_norm(x, F::LayerNormFuncOptions({x.size(-1)}).weight(w.to(dt)).bias(b.to(dt)).eps(eps));
}

namespace {

// The causal mask of `group` stacked query groups of S positions, (g*S, S), true above the
// diagonal (future keys); built once per (S, group, device) and thread, as the RoPE tables are.
torch::Tensor future_mask(int64_t S, int64_t group, torch::Device dev) {
  return per_thread_cached(std::make_tuple(S, group, dev), [&] {
    torch::Tensor future = torch::ones({S, S}, torch::TensorOptions().dtype(torch::kBool).device(dev)).triu(1);
    return group > 1 ? future.repeat({group, 1}) : future;  // row j*S + i is query position i
  });
}

// softmax(scale * x + causal mask) over the last dim as one autograd node, computed in fp32
// (Megatron's ScaledUpperTriangMaskedSoftmax, fused_softmax.py): forward scales into one fp32
// buffer, masks it in place and keeps only the probabilities (in `dtype`); backward is ATen's
// fused softmax backward, dx = scale * y * (dy - sum(dy * y)) — masked entries have y = 0, so
// their gradient is 0 without a mask pass. Two passes each way instead of the op-by-op six; fp32
// on the CPU one pass each way over the unmasked triangle only (cpu::causal_softmax_forward).
struct ScaledCausalSoftmax : torch::autograd::Function<ScaledCausalSoftmax> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t group, double scale,
                               int64_t dtype, bool fused) {
    torch::Tensor y;
    if (fused) {  // causal_softmax checked the layout: x (R, S) rows, fp32
      const torch::Tensor xc = x.contiguous();
      y = torch::empty_like(xc);
      const int64_t S = xc.size(-1);
      cpu::causal_softmax_forward(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel() / S, S,
                                  static_cast<float>(scale));
    } else {
      torch::Tensor z = x.scalar_type() == torch::kFloat ? x * scale : x.to(torch::kFloat).mul_(scale);
      z.masked_fill_(future_mask(x.size(-1), group, x.device()), -INFINITY);
      y = at::_softmax(z, -1, false).to(static_cast<torch::ScalarType>(dtype));
    }
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["fused"] = fused;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const torch::Tensor y = ctx->get_saved_variables()[0];
    const double scale = ctx->saved_data["scale"].toDouble();
    if (ctx->saved_data["fused"].toBool()) {
      const torch::Tensor dy = g[0].to(torch::kFloat).contiguous();
      torch::Tensor dx = torch::empty_like(y);
      const int64_t S = y.size(-1);
      cpu::causal_softmax_backward(dy.data_ptr<float>(), y.data_ptr<float>(), dx.data_ptr<float>(), y.numel() / S, S,
                                   static_cast<float>(scale));
      return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const torch::Tensor dz =
        at::_softmax_backward_data(g[0].to(torch::kFloat).contiguous(), y.to(torch::kFloat), -1, torch::kFloat);
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    return {dz.mul_(scale).to(x_dtype), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

// softmax(Q K^T / sqrt(hd) + causal mask) (Vaswani et al. 2017, §3.2.1), the scores given.
torch::Tensor causal_softmax(const torch::Tensor& scores, int64_t group, double scale, torch::ScalarType dtype) {
  // scores: (B, nkv, g*S, S) -> probabilities of the same shape in `dtype`
  const bool fused = fused_cpu(scores) && dtype == torch::kFloat && scale > 0.0 && scores.dim() >= 2 &&
                     scores.size(-2) == group * scores.size(-1);
  return ScaledCausalSoftmax::apply(scores, group, scale, static_cast<int64_t>(dtype), fused);
}

torch::Tensor gelu_tanh(const torch::Tensor& x) { return F::gelu(x, F::GELUFuncOptions().approximate("tanh")); }

namespace {

// SwiGLU's silu-then-multiply as one autograd node over fp32 CPU tensors: one pass each way
// (cpu_kernels.hpp) instead of three, keeping what the two ops keep (g, u and s = silu(g): the
// simulator's eager SwiGLU count, layer_cost.cpp). g, u: (.., F)
struct FusedSwiglu : torch::autograd::Function<FusedSwiglu> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& g_in,
                               const torch::Tensor& u_in) {
    const torch::Tensor g = g_in.contiguous(), u = u_in.contiguous();
    torch::Tensor s = torch::empty_like(g), y = torch::empty_like(g);
    cpu::swiglu_forward(g.data_ptr<float>(), u.data_ptr<float>(), s.data_ptr<float>(), y.data_ptr<float>(), g.numel());
    ctx->save_for_backward({g, u, s});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &g = saved[0], &u = saved[1], &s = saved[2];
    const torch::Tensor dy = grads[0].contiguous();
    torch::Tensor dg = torch::empty_like(g), du = torch::empty_like(u);
    cpu::swiglu_backward(dy.data_ptr<float>(), g.data_ptr<float>(), u.data_ptr<float>(), s.data_ptr<float>(),
                         dg.data_ptr<float>(), du.data_ptr<float>(), g.numel());
    return {dg, du};
  }
};

}  // namespace

torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u) {
  if (fused_cpu(g) && fused_cpu(u) && g.sizes() == u.sizes()) return FusedSwiglu::apply(g, u);
  return F::silu(g) * u;
}

}  // namespace shardplan::executor
