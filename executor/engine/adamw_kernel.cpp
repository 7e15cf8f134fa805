#include "adamw_kernel.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

// Work split into fixed blocks (not per thread) so that the sums, and so the clipping, are the
// same whatever the thread count.
constexpr int64_t kBlock = int64_t{1} << 16;

bool fused_ok(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

double block_squared_sum(const float* __restrict x, int64_t n) {
  // Eight independent double accumulators (the compiler keeps them in vector registers).
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

struct FusedCoefficients {
  float b1, one_minus_b1, b2, one_minus_b2, eps, inv_sqrt_bc2, step_size, grad_scale;
};

// One pass: read p, g, m, v; write p, m, v. `decay` is 1 - lr*wd (or 1).
void fused_span(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                const FusedCoefficients& c, float decay) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * c.grad_scale;
    const float mi = c.b1 * m[i] + c.one_minus_b1 * gi;
    const float vi = c.b2 * v[i] + c.one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps;
    p[i] = p[i] * decay - c.step_size * (mi / denom);
  }
}

// Adam's bias corrections after `step` updates (Kingma & Ba 2015, Algorithm 1): 1 - beta^t.
struct BiasCorrections {
  double first, second;
};
BiasCorrections bias_corrections(const AdamWScalars& s) {
  const double t = static_cast<double>(s.step);
  return {1.0 - std::pow(s.beta1, t), 1.0 - std::pow(s.beta2, t)};
}

void adamw_ops(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v, const AdamWScalars& s,
               const std::vector<DecaySpan>& spans) {
  // The same update as LibTorch ops over the whole shard (torch.optim.AdamW, foreach=False): a
  // few kernel launches per step on a GPU, whatever the number of parameters.
  const auto [bc1, bc2] = bias_corrections(s);
  torch::Tensor gs = g.to(torch::kFloat);
  if (s.grad_scale != 1.0) gs = gs * s.grad_scale;
  if (s.weight_decay > 0)
    for (const DecaySpan& d : spans)
      if (d.decay) p.narrow(0, d.begin, d.length).mul_(1.0 - s.lr * s.weight_decay);
  m.mul_(s.beta1).add_(gs, 1.0 - s.beta1);
  v.mul_(s.beta2).addcmul_(gs, gs, 1.0 - s.beta2);
  const torch::Tensor denom = (v.sqrt() / std::sqrt(bc2)).add_(s.eps);
  p.addcdiv_(m, denom, -s.lr / bc1);
}

}  // namespace

torch::Tensor squared_sum(const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  if (!fused_ok(g)) return g.to(torch::kDouble).pow(2).sum();
  const int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  const float* x = g.data_ptr<float>();
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      partial[static_cast<size_t>(b)] = block_squared_sum(x + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  double sum = 0;
  for (double s : partial) sum += s;
  return torch::scalar_tensor(sum, torch::TensorOptions().dtype(torch::kDouble));
}

bool adamw_is_fused(const torch::Tensor& p, const torch::Tensor& g) { return fused_ok(p) && g.device().is_cpu(); }

void adamw_update(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v, const AdamWScalars& s,
                  const std::vector<DecaySpan>& spans) {
  torch::NoGradGuard no_grad;
  EXECUTOR_CHECK(p.dim() == 1 && g.numel() == p.numel() && m.numel() == p.numel() && v.numel() == p.numel(),
                 "AdamW: parameter, gradient and moments must be 1-d of one length");
  EXECUTOR_CHECK(s.step >= 1, "AdamW: the step count starts at 1");
  if (!(adamw_is_fused(p, g) && fused_ok(m) && fused_ok(v))) return adamw_ops(p, g, m, v, s, spans);
  const torch::Tensor gf = g.scalar_type() == torch::kFloat ? g.contiguous() : g.to(torch::kFloat);
  const auto [bc1, bc2] = bias_corrections(s);
  const FusedCoefficients c{static_cast<float>(s.beta1),    static_cast<float>(1.0 - s.beta1),
                            static_cast<float>(s.beta2),    static_cast<float>(1.0 - s.beta2),
                            static_cast<float>(s.eps),      static_cast<float>(1.0 / std::sqrt(bc2)),
                            static_cast<float>(s.lr / bc1), static_cast<float>(s.grad_scale)};
  float *pp = p.data_ptr<float>(), *mp = m.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float* gp = gf.data_ptr<float>();
  for (const DecaySpan& d : spans) {
    EXECUTOR_CHECK(d.begin >= 0 && d.length >= 0 && d.begin + d.length <= p.numel(), "AdamW: span outside the shard");
    const float decay = d.decay && s.weight_decay > 0 ? static_cast<float>(1.0 - s.lr * s.weight_decay) : 1.0F;
    at::parallel_for(d.begin, d.begin + d.length, kBlock,
                     [&](int64_t b, int64_t e) { fused_span(pp + b, gp + b, mp + b, vp + b, e - b, c, decay); });
  }
}

}  // namespace shardplan::executor
