// The fused CPU paths of the executor against the LibTorch-op forms they replace, in double
// where the reference allows: AdamW and the gradient's squared sum (engine/adamw_kernel.hpp),
// RMSNorm and RoPE forward and backward (model/cpu_kernels.hpp through model/ops.hpp), the
// scaled causal softmax. Each also on shapes that exercise the tails (lengths not a multiple of
// the vector width or of the work blocks) and, where threads split the work, for equality
// across thread counts. Also the SLEEF row primitives and the eager
// attention core's CBLAS GEMMs (model/attention_gemms.hpp) on the strided views the model makes.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>

#include "executor/engine/adamw_kernel.hpp"
#include "executor/model/attention_gemms.hpp"
#include "executor/model/ops.hpp"
#include "executor/model/row_math.hpp"

namespace shardplan::executor {
namespace fused_kernels_test {  // named, not anonymous: the files share a unity-build unit

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() / b.to(torch::kDouble).abs().max()).item<double>();
}

// torch.optim.AdamW's update in double, as the reference.
void reference_adamw(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v,
                     const AdamWScalars& s, const std::vector<DecaySpan>& spans) {
  const torch::Tensor gs = g * s.grad_scale;
  for (const DecaySpan& d : spans)
    if (d.decay) p.narrow(0, d.begin, d.length).mul_(1.0 - s.lr * s.weight_decay);
  m.mul_(s.beta1).add_(gs, 1.0 - s.beta1);
  v.mul_(s.beta2).addcmul_(gs, gs, 1.0 - s.beta2);
  const double bc1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
  const double bc2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
  p.addcdiv_(m, v.sqrt() / std::sqrt(bc2) + s.eps, -s.lr / bc1);
}

TEST(FusedAdamW, MatchesTheTorchUpdateOverStepsWithDecaySpansAndClipping) {
  torch::manual_seed(3);
  const int64_t n = 70001;  // not a multiple of the vector width or of the 65536-element blocks
  const std::vector<DecaySpan> spans{{0, 40000, true}, {40000, 1000, false}, {41000, 28990, true}};  // 11 padding
  torch::Tensor p = torch::randn({n}), m = torch::zeros({n}), v = torch::zeros({n});
  p.narrow(0, n - 11, 11).zero_();
  torch::Tensor pr = p.to(torch::kDouble), mr = m.to(torch::kDouble), vr = v.to(torch::kDouble);
  ASSERT_TRUE(adamw_is_fused(p, p));
  for (int64_t step = 1; step <= 5; ++step) {
    torch::Tensor g = torch::randn({n}) * 0.01;
    g.narrow(0, n - 11, 11).zero_();
    const AdamWScalars s{1e-3, 0.9, 0.95, 1e-8, 0.1, step, step == 3 ? 0.25 : 1.0};
    adamw_update(p, g, m, v, s, spans);
    reference_adamw(pr, g.to(torch::kDouble), mr, vr, s, spans);
  }
  EXPECT_LT(max_rel(p, pr), 1e-6);
  EXPECT_LT(max_rel(m, mr), 1e-6);
  EXPECT_LT(max_rel(v, vr), 1e-5);
  EXPECT_EQ(p.narrow(0, n - 11, 11).abs().sum().item<float>(), 0.0F);  // padding untouched
  // Decay is per span: decaying the no-decay span too (lr * wd = 1e-4 a step) would move it by
  // ~5e-4 relative over the five steps, far outside the tolerance above; check that it would.
  torch::Tensor decayed = pr.narrow(0, 40000, 1000) * std::pow(1.0 - 1e-4, 5);
  EXPECT_GT(max_rel(p.narrow(0, 40000, 1000), decayed), 1e-5);
}

TEST(FusedAdamW, SixteenBitGradientsGiveTheFp32Update) {
  torch::manual_seed(4);
  const int64_t n = 1000;
  torch::Tensor p = torch::randn({n}), m = torch::zeros({n}), v = torch::zeros({n});
  torch::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  const torch::Tensor g = (torch::randn({n}) * 0.01).to(torch::kBFloat16);
  const AdamWScalars s{1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1.0};
  adamw_update(p, g, m, v, s, {{0, n, true}});
  adamw_update(p2, g.to(torch::kFloat), m2, v2, s, {{0, n, true}});
  EXPECT_TRUE(torch::equal(p, p2));
  EXPECT_TRUE(torch::equal(v, v2));
}

TEST(FusedAdamW, BadShapesAreRefused) {
  torch::Tensor p = torch::zeros({8}), m = torch::zeros({8}), v = torch::zeros({7});
  EXPECT_ANY_THROW(adamw_update(p, torch::zeros({8}), m, v, AdamWScalars{}, {{0, 8, true}}));
  v = torch::zeros({8});
  EXPECT_ANY_THROW(adamw_update(p, torch::zeros({8}), m, v, AdamWScalars{}, {{4, 8, true}}));
}

TEST(SquaredSum, MatchesDoubleAndIsTheSameForAnyThreadCount) {
  torch::manual_seed(5);
  const torch::Tensor g = torch::randn({200003});
  const double ref = g.to(torch::kDouble).pow(2).sum().item<double>();
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double one = squared_sum(g).item<double>();
  at::set_num_threads(2);
  const double two = squared_sum(g).item<double>();
  at::set_num_threads(threads);
  EXPECT_NEAR(one, ref, 1e-12 * ref);
  EXPECT_EQ(one, two);
  EXPECT_EQ(squared_sum(g.narrow(0, 5, 3)).item<double>(),
            g.narrow(0, 5, 3).to(torch::kDouble).pow(2).sum().item<double>());
}

// x (.., H) -> the op-by-op RMSNorm in double.
torch::Tensor reference_rms_norm(const torch::Tensor& x, const torch::Tensor& w) {
  return w * x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5);
}

TEST(FusedRmsNorm, ForwardAndBackwardMatchTheOpForm) {
  torch::manual_seed(6);
  for (const int64_t H : {256, 37}) {  // 37: a tail after the 8-wide lanes
    const torch::Tensor x0 = torch::randn({3, 70, H}), w0 = torch::rand({H}) + 0.5, dy = torch::randn({3, 70, H});
    const torch::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
    const torch::Tensor y = rms_norm(x, w, 1e-5);
    y.backward(dy);
    const torch::Tensor xr = x0.to(torch::kDouble).requires_grad_(), wr = w0.to(torch::kDouble).requires_grad_();
    const torch::Tensor yr = reference_rms_norm(xr, wr);
    yr.backward(dy.to(torch::kDouble));
    EXPECT_LT(max_rel(y.detach(), yr.detach()), 1e-6) << H;
    EXPECT_LT(max_rel(x.grad(), xr.grad()), 1e-5) << H;
    EXPECT_LT(max_rel(w.grad(), wr.grad()), 1e-5) << H;
  }
}

TEST(FusedRmsNorm, WeightGradientIsTheSameForAnyThreadCount) {
  torch::manual_seed(7);
  const torch::Tensor x0 = torch::randn({300, 64}), dy = torch::randn({300, 64});
  std::vector<torch::Tensor> grads;
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    const torch::Tensor x = x0.clone().requires_grad_(), w = torch::ones({64}).requires_grad_();
    rms_norm(x, w, 1e-5).backward(dy);
    grads.push_back(w.grad().clone());
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

// RoPE, rotate-half, in double from its definition (no shared code with ops.cpp's tables).
torch::Tensor reference_rotary(const torch::Tensor& x, int64_t rot) {
  const int64_t S = x.size(2), half = rot / 2;
  const auto o = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor inv = torch::pow(10000.0, -torch::arange(0, rot, 2, o) / static_cast<double>(rot));
  const torch::Tensor ang = torch::outer(torch::arange(S, o), inv);  // (S, rot/2)
  const torch::Tensor c = ang.cos(), s = ang.sin();
  const torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  std::vector<torch::Tensor> parts{x1 * c - x2 * s, x2 * c + x1 * s};
  if (rot < x.size(-1)) parts.push_back(x.narrow(-1, rot, x.size(-1) - rot));
  return torch::cat(parts, -1);
}

TEST(FusedRotary, ForwardAndBackwardMatchTheDefinitionOnATransposedView) {
  torch::manual_seed(8);
  for (const int64_t rot : {16, 8}) {  // the whole head, and a partial rotary_dim with a copied tail
    // q as the model makes it: (B, S, n*hd) -> view (B, S, n, hd) -> transpose (B, n, S, hd)
    const torch::Tensor base = torch::randn({2, 9, 3 * 16});
    const torch::Tensor src = base.clone().requires_grad_();
    const torch::Tensor x = src.view({2, 9, 3, 16}).transpose(1, 2);
    const torch::Tensor y = rotary(x, rot);
    const torch::Tensor dy = torch::randn(y.sizes());
    y.backward(dy);
    const torch::Tensor srcr = base.to(torch::kDouble).requires_grad_();
    const torch::Tensor yr = reference_rotary(srcr.view({2, 9, 3, 16}).transpose(1, 2), rot);
    yr.backward(dy.to(torch::kDouble));
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_LT(max_rel(y.detach(), yr.detach()), 1e-6) << rot;
    EXPECT_LT(max_rel(src.grad(), srcr.grad()), 1e-6) << rot;
  }
}

TEST(ScaledCausalSoftmax, MatchesMaskedSoftmaxAndItsGradientWithStackedGroups) {
  torch::manual_seed(9);
  const int64_t S = 10, group = 2;
  const torch::Tensor s0 = torch::randn({2, 3, group * S, S});
  torch::Tensor future = torch::ones({S, S}, torch::kBool).triu(1).repeat({group, 1});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const torch::Tensor s = s0.to(dtype).detach().clone().requires_grad_();
    const torch::Tensor y = causal_softmax(s, group, 0.3, dtype);
    const torch::Tensor dy = torch::randn(y.sizes());
    y.backward(dy.to(dtype));
    const torch::Tensor sr = s0.to(dtype).to(torch::kDouble).detach().requires_grad_();
    const torch::Tensor yr = torch::softmax((sr * 0.3).masked_fill(future, -INFINITY), -1);
    yr.backward(dy.to(dtype).to(torch::kDouble));
    const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
    EXPECT_LT(max_rel(y.detach(), yr.detach()), tol);
    EXPECT_LT(max_rel(s.grad(), sr.grad()), tol);
    EXPECT_EQ(y.detach().to(torch::kFloat).masked_select(future.expand(y.sizes())).abs().sum().item<float>(), 0.0F);
  }
}

TEST(RowMath, MatchesStdExpOnEveryTailLength) {
  torch::manual_seed(10);
  for (const int64_t n : {1, 7, 8, 9, 31, 4096}) {
    const torch::Tensor x = torch::randn({n}) * 4;
    torch::Tensor y = torch::empty({n});
    const float* xp = x.data_ptr<float>();
    const float m = cpu::row_max(xp, n);
    EXPECT_EQ(m, x.max().item<float>()) << n;
    const float sum = cpu::exp_affine_sum(xp, 0.5F, 0.5F * m, y.data_ptr<float>(), n);
    const torch::Tensor ref = (x.to(torch::kDouble) * 0.5 - 0.5 * m).exp();
    EXPECT_LT(max_rel(y, ref), 1e-6) << n;
    EXPECT_NEAR(sum, ref.sum().item<double>(), 1e-5 * ref.sum().item<double>()) << n;
    const torch::Tensor a = torch::randn({n});
    EXPECT_NEAR(cpu::row_dot(a.data_ptr<float>(), xp, n), (a.to(torch::kDouble) * x).sum().item<double>(),
                1e-5 * (a.abs() * x.abs()).sum().item<double>())
        << n;
  }
}

TEST(FusedSwiglu, ForwardAndBackwardMatchSiluTimesUpInDouble) {
  torch::manual_seed(13);
  for (const int64_t F : {688, 13}) {  // 13: a tail after the 8-wide lanes
    torch::Tensor g0 = torch::randn({3, 5, F}) * 3;
    g0[0][0][0] = -120.0F;  // exp(-g) overflows: sigmoid 0, silu -0
    const torch::Tensor u0 = torch::randn({3, 5, F}), dy = torch::randn({3, 5, F});
    const torch::Tensor g = g0.clone().requires_grad_(), u = u0.clone().requires_grad_();
    const torch::Tensor y = swiglu(g, u);
    y.backward(dy);
    const torch::Tensor gr = g0.to(torch::kDouble).requires_grad_(), ur = u0.to(torch::kDouble).requires_grad_();
    const torch::Tensor yr = gr * torch::sigmoid(gr) * ur;
    yr.backward(dy.to(torch::kDouble));
    EXPECT_LT(max_rel(y.detach(), yr.detach()), 1e-6) << F;
    EXPECT_LT(max_rel(g.grad(), gr.grad()), 1e-6) << F;
    EXPECT_LT(max_rel(u.grad(), ur.grad()), 1e-6) << F;
    EXPECT_TRUE(std::isfinite(g.grad().abs().max().item<float>())) << F;
  }
}

// Runs attention_scores / attention_values on q, k, v as the model hands them over — views
// (B, n, S, hd) of (B, S, n*hd) projections, q as that view (per-head GEMMs) or contiguous (a
// group's heads stacked into one GEMM) — with a softmax between them (masked where `future` is
// defined, as causal), backward too, and checks the context and every gradient against the same
// computation in double. Returns the scores and their double reference.
std::pair<torch::Tensor, torch::Tensor> check_attention_gemms(int64_t B, int64_t nh, int64_t nkv, int64_t S, int64_t hd,
                                                              bool contiguous_q, const torch::Tensor& future) {
  const int64_t g = nh / nkv;
  const bool causal = future.defined();
  const auto masked = [&](const torch::Tensor& t) { return causal ? t.masked_fill(future, -INFINITY) : t; };
  const torch::Tensor q0 = torch::randn({B, S, nh * hd}), k0 = torch::randn({B, S, nkv * hd});
  const torch::Tensor v0 = torch::randn({B, S, nkv * hd}), dctx = torch::randn({B, S, nh * hd});
  const auto heads = [&](const torch::Tensor& t, int64_t n) { return t.view({B, S, n, hd}).transpose(1, 2); };
  const torch::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const torch::Tensor qh = contiguous_q ? heads(q, nh).contiguous() : heads(q, nh);
  const torch::Tensor scores = attention_scores(qh, heads(k, nkv), causal);
  const torch::Tensor ctx = attention_values(torch::softmax(masked(scores), -1), heads(v, nkv), nh, causal);
  ctx.backward(dctx);
  const torch::Tensor qr = q0.to(torch::kDouble).requires_grad_(), kr = k0.to(torch::kDouble).requires_grad_();
  const torch::Tensor vr = v0.to(torch::kDouble).requires_grad_();
  const torch::Tensor sr = torch::matmul(heads(qr, nh).reshape({B, nkv, g * S, hd}), heads(kr, nkv).transpose(-2, -1));
  const torch::Tensor cr = torch::matmul(torch::softmax(masked(sr), -1), heads(vr, nkv))
                               .view({B, nh, S, hd})
                               .transpose(1, 2)
                               .reshape({B, S, nh * hd});
  cr.backward(dctx.to(torch::kDouble));
  EXPECT_LT(max_rel(ctx.detach(), cr.detach()), 1e-6) << contiguous_q;
  EXPECT_LT(max_rel(q.grad(), qr.grad()), 1e-5) << contiguous_q;
  EXPECT_LT(max_rel(k.grad(), kr.grad()), 1e-5) << contiguous_q;
  EXPECT_LT(max_rel(v.grad(), vr.grad()), 1e-5) << contiguous_q;
  return {scores.detach(), sr.detach()};
}

TEST(AttentionGemms, MatchMatmulOnStridedGroupedViewsForwardAndBackward) {
  if (!attention_gemms_use_sgemm()) GTEST_SKIP() << "built with neither oneDNN nor CBLAS";
  torch::manual_seed(12);
  for (const bool contiguous_q : {false, true}) {
    const auto [scores, sr] = check_attention_gemms(2, 6, 2, 9, 8, contiguous_q, torch::Tensor());
    EXPECT_LT(max_rel(scores, sr), 1e-6) << contiguous_q;
  }
}

// Causal (model/attention_gemms.hpp): the row blocks of uneven size (S = 100: 3 blocks of 33, 33
// and 34 rows) against keys up to each block's end only; the masked softmax between them, as the
// model runs it. Scores on and below the diagonal, the context and every gradient match the full
// double-precision computation; the scores above the row blocks are 0.
TEST(AttentionGemms, CausalRowBlocksMatchTheFullMaskedComputation) {
  if (!attention_gemms_use_sgemm()) GTEST_SKIP() << "built with neither oneDNN nor CBLAS";
  torch::manual_seed(13);
  const int64_t nh = 4, nkv = 2, S = 100;
  ASSERT_EQ(causal_row_blocks(S), 3);
  const torch::Tensor future = torch::ones({S, S}, torch::kBool).triu(1).repeat({nh / nkv, 1});  // (g*S, S)
  for (const bool contiguous_q : {false, true}) {
    const auto [scores, sr] = check_attention_gemms(2, nh, nkv, S, 8, contiguous_q, future);
    EXPECT_LT(max_rel(scores.masked_fill(future, 0.0), sr.masked_fill(future, 0.0)), 1e-6) << contiguous_q;
    EXPECT_EQ(scores.narrow(2, 0, 33).narrow(3, 33, S - 33).abs().max().item<float>(), 0.0F) << contiguous_q;
  }
}

}  // namespace fused_kernels_test
}  // namespace shardplan::executor
