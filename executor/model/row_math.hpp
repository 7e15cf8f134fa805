#pragma once
// Vectorised primitives over one contiguous fp32 row, for the fused softmax and cross-entropy
// loops (cpu_kernels.hpp). exp is SLEEF's (Shibata & Petrogalli, "SLEEF: A Portable Vectorized
// Library of C Standard Mathematical Functions", IEEE TPDS 2020), its 1-ULP expf on 8 lanes
// (Sleef_expf8_u10avx2), the same routine LibTorch's own CPU softmax and exp kernels call.
// The 8-lane paths run where the CPU has AVX2 and FMA (checked once, at run time); elsewhere,
// or in a build without SLEEF, plain loops with std::exp give the same results to rounding.
// Legend: n elements of a row; x, y, dy, dx rows of n floats.
#include <cstdint>

namespace shardplan::executor::cpu {

// Whether the 8-lane (AVX2 + FMA + SLEEF) paths are in use on this machine.
bool row_math_vectorised();

// max_j x_j; n >= 1.
float row_max(const float* x, int64_t n);

// y_j = exp(scale * x_j - shift); returns sum_j y_j. x and y may be the same row.
float exp_affine_sum(const float* x, float scale, float shift, float* y, int64_t n);

// y_j *= a.
void scale_row(float* y, float a, int64_t n);

// sum_j a_j * b_j.
float row_dot(const float* a, const float* b, int64_t n);

// The softmax backward of one row: dx_j = a * y_j * (dy_j - d). dx may be dy's row.
void softmax_grad_row(const float* y, const float* dy, float d, float a, float* dx, int64_t n);

// SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6) with SiLU = x sigmoid(x)
// (Elfwing et al. 2018): s = g sigmoid(g), y = s u. s is kept for backward (du = dy s).
void swiglu_forward_row(const float* g, const float* u, float* s, float* y, int64_t n);

// Its backward: du = dy s, dg = dy u silu'(g), silu'(g) = sigma + s (1 - sigma), sigma = sigmoid(g).
void swiglu_backward_row(const float* dy, const float* g, const float* u, const float* s, float* dg, float* du,
                         int64_t n);

}  // namespace shardplan::executor::cpu
