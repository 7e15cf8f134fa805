#include "ops.hpp"

#include <cmath>
#include <utility>
#include <vector>

namespace shardplan::executor {

namespace {

namespace F = torch::nn::functional;

// RMSNorm (Zhang & Sennrich 2019) computed in fp32 as Hugging Face Llama does, as one autograd
// node that saves its input and the (rows, 1) inverse RMS only (like fused RMSNorm kernels),
// instead of the three (rows, H) tensors the op-by-op form keeps. x: (.., H), w: (H)
struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor w, double eps) {
    const torch::Tensor xf = x.to(torch::kFloat);
    const torch::Tensor rstd = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);  // (.., 1)
    ctx->save_for_backward({x, w, rstd});
    return w * (xf * rstd).to(x.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
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

// Softmax over the last dim computed in fp32 that keeps only its output, in the input's dtype,
// for backward (as fused softmax kernels do): dx = y * (dy - sum(dy * y)). x: (.., S)
struct Softmax32 : torch::autograd::Function<Softmax32> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x) {
    torch::Tensor y = torch::softmax(x.to(torch::kFloat), -1).to(x.scalar_type());
    ctx->save_for_backward({y});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const torch::Tensor y = ctx->get_saved_variables()[0];
    const torch::Tensor yf = y.to(torch::kFloat), gf = g[0].to(torch::kFloat);
    return {(yf * (gf - (gf * yf).sum(-1, true))).to(y.scalar_type())};
  }
};

}  // namespace

// The cos and sin tables of RoPE for S positions and `rot` dims, built once per (S, rot, dtype,
// device) and thread, as Hugging Face's rotary embedding caches them: every layer's q and k (and
// recomputed blocks) read the same tables instead of rebuilding them (eight small ops each).
namespace {

std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t S, int64_t rot, torch::ScalarType dt, torch::Device dev) {
  struct Entry {
    int64_t S, rot;
    torch::ScalarType dt;
    torch::Device dev;
    torch::Tensor cos, sin;
  };
  thread_local std::vector<Entry> cache;
  for (const Entry& e : cache)
    if (e.S == S && e.rot == rot && e.dt == dt && e.dev == dev) return {e.cos, e.sin};
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(dev);
  const torch::Tensor inv_freq = torch::pow(10000.0, -torch::arange(0, rot, 2, opts) / static_cast<double>(rot));
  const torch::Tensor angles = torch::outer(torch::arange(S, opts), inv_freq);  // (S, rot/2)
  const torch::Tensor emb = torch::cat({angles, angles}, -1);                   // (S, rot)
  if (cache.size() >= 8) cache.erase(cache.begin());  // a run uses one or two shapes
  cache.push_back({S, rot, dt, dev, emb.cos().to(dt), emb.sin().to(dt)});
  return {cache.back().cos, cache.back().sin};
}

}  // namespace

// RoPE, rotate-half form (Su et al. 2021 "RoFormer", §3.4; Hugging Face Llama). x: (B, n, S, hd)
// at positions 0..S-1, or at `positions` (S) of a sequence of `total` when defined (context
// parallelism).
torch::Tensor rotary(const torch::Tensor& x, int64_t rot, const torch::Tensor& positions, int64_t total) {
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

// softmax(Q K^T / sqrt(hd) + causal mask) (Vaswani et al. 2017, §3.2.1), the scores given.
torch::Tensor causal_softmax(const torch::Tensor& scores, int64_t group, double scale, torch::ScalarType dtype) {
  const int64_t S = scores.size(-1);
  const auto mask_opts = torch::TensorOptions().dtype(torch::kBool).device(scores.device());
  torch::Tensor future = torch::ones({S, S}, mask_opts).triu(1);
  if (group > 1) future = future.repeat({group, 1});  // row j*S + i is query position i
  const torch::Tensor masked = (scores * scale).masked_fill(future, -INFINITY);  // (B, nkv, g*S, S)
  return Softmax32::apply(masked.to(dtype));
}

torch::Tensor gelu_tanh(const torch::Tensor& x) { return F::gelu(x, F::GELUFuncOptions().approximate("tanh")); }

torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u) { return F::silu(g) * u; }

}  // namespace shardplan::executor
