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
void rotary(HeadView x, HeadView y, const float* cos, const float* sin, int64_t B, int64_t heads, int64_t S,
            int64_t hd, int64_t rot, bool inverse);

}  // namespace shardplan::executor::cpu
