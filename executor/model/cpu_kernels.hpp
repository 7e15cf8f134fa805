#pragma once
// Fused fp32 CPU loops for the transformer's memory-bound ops (ops.cpp calls them for fp32
// tensors on the CPU; other dtypes and devices take the LibTorch-op forms). Each is one pass
// over its tensors where the op-by-op form makes five to ten, which on a CPU costs more than
// the arithmetic (the same reason Megatron and Liger fuse them on GPUs).
// Legend: R rows (tokens), H hidden, B batch, n heads, S sequence, hd head dim, rot rotated dims.
#include <cstdint>

namespace shardplan::executor::cpu {

// RMSNorm (Zhang & Sennrich 2019, eq. 4): rstd_r = 1 / sqrt(mean_j x_rj^2 + eps), y = w * x * rstd.
// x, y: (R, H) contiguous; w: (H); rstd: (R)
void rms_norm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t hidden, float eps);

// Its backward, n = x * rstd, gw = dy * w:  dx = rstd * (gw - n * mean_j(gw * n)),  dw = sum_r dy * n.
// dy, x, dx: (R, H) contiguous; rstd: (R); dw: (H), overwritten (nullptr: not wanted).
void rms_norm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t rows, int64_t hidden);

// A 4-d view (B, n, S, hd) with unit stride on hd: element (b, h, s, i) at data[b*s0 + h*s1 + s*s2 + i].
struct HeadView {
  float* data;
  int64_t s0, s1, s2;
};

// RoPE, rotate-half form (Su et al. 2021, §3.4), on the first `rot` dims; the rest copied:
//   y_i = x_i cos_i - x_{i+rot/2} sin_i,  y_{i+rot/2} = x_{i+rot/2} cos_{i+rot/2} + x_i sin_{i+rot/2}.
// `inverse` applies the transpose (the rotation by -theta): backward's dx from dy. x and y must
// not overlap.
// cos, sin: (S, rot) contiguous, row s for position s.
void rotary(HeadView x, HeadView y, const float* cos, const float* sin, int64_t B, int64_t heads, int64_t S, int64_t hd,
            int64_t rot, bool inverse);

// softmax(scale * x + causal mask) over rows of S keys (Megatron's ScaledUpperTriangMaskedSoftmax):
// row r is query position i = r mod S (query groups stacked along the rows, as attention_core
// stacks them), so keys j <= i count and j > i get y = 0; only the i + 1 counted keys are read
// or exponentiated. x, y: (R, S) contiguous, may be the same buffer.
void causal_softmax_forward(const float* x, float* y, int64_t rows, int64_t S, float scale);

// Its backward, dx = scale * y * (dy - sum_j dy_j y_j), 0 above the diagonal. dx may be dy.
void causal_softmax_backward(const float* dy, const float* y, float* dx, int64_t rows, int64_t S, float scale);

// SwiGLU over n elements: s = silu(g), y = s u (row_math.hpp swiglu_forward_row), split over
// threads; and its backward, du = dy s, dg = dy u silu'(g). All (n) contiguous.
void swiglu_forward(const float* g, const float* u, float* s, float* y, int64_t n);
void swiglu_backward(const float* dy, const float* g, const float* u, const float* s, float* dg, float* du, int64_t n);

// Cross-entropy forward over vocabulary rows: ez_rj = exp(z_rj - zmax_r) for the first `valid`
// of V columns (0 in padded ones), sum_r = sum_j ez_rj. z, ez: (R, V) contiguous; zmax, sum: (R)
void exp_shifted_rows(const float* z, const float* zmax, float* ez, float* sum, int64_t rows, int64_t V, int64_t valid);

// Its backward in place: grad_r = coef_r * ez_r, then grad_r[target_r] -= hit_r
// (coef = dloss / sum, hit = dloss where the target is in this shard, else 0). ez: (R, V); coef,
// hit, target: (R)
void cross_entropy_grad_rows(float* ez, const float* coef, const float* hit, const int64_t* target, int64_t rows,
                             int64_t V);

}  // namespace shardplan::executor::cpu
