#include "row_math.hpp"

#include <cmath>
#include <cstring>

#if defined(SHARDPLAN_HAVE_SLEEF) && defined(__x86_64__)
#define SHARDPLAN_ROW_AVX2 1
#include <immintrin.h>
// libsleef's AVX2 expf; sleef.h declares it only when the whole file is built with -mavx, which
// this one is not (the AVX2 functions below are, by their target attribute, and only they call it).
extern "C" __m256 Sleef_expf8_u10avx2(__m256);
#endif

namespace shardplan::executor::cpu {

namespace {

// The plain forms: any CPU, and the reference the 8-lane forms agree with to rounding.
float row_max_plain(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t j = 1; j < n; ++j) m = x[j] > m || std::isnan(x[j]) ? x[j] : m;
  return m;
}
float exp_affine_sum_plain(const float* x, float scale, float shift, float* y, int64_t n) {
  float s = 0.0F;
  for (int64_t j = 0; j < n; ++j) s += (y[j] = std::exp(scale * x[j] - shift));
  return s;
}
void scale_row_plain(float* y, float a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] *= a;
}
float row_dot_plain(const float* a, const float* b, int64_t n) {
  float s = 0.0F;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}
void softmax_grad_row_plain(const float* y, const float* dy, float d, float a, float* dx, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dx[j] = a * y[j] * (dy[j] - d);
}

float sigmoid_plain(float x) { return 1.0F / (1.0F + std::exp(-x)); }
void swiglu_forward_row_plain(const float* g, const float* u, float* s, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = (s[j] = g[j] * sigmoid_plain(g[j])) * u[j];
}
void swiglu_backward_row_plain(const float* dy, const float* g, const float* u, const float* s, float* dg, float* du,
                               int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const float sig = sigmoid_plain(g[j]), d = dy[j];
    dg[j] = d * u[j] * (sig + s[j] * (1.0F - sig));
    du[j] = d * s[j];
  }
}

#ifdef SHARDPLAN_ROW_AVX2
#define SHARDPLAN_AVX2 __attribute__((target("avx2,fma")))

// Lanes [0, left) set, left in 1..7: the tail of a row.
SHARDPLAN_AVX2 __m256i tail_mask(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
SHARDPLAN_AVX2 float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
SHARDPLAN_AVX2 float lanes_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps(s, s, 1)));
}

SHARDPLAN_AVX2 float row_max_avx2(const float* x, int64_t n) {
  const __m256 lowest = _mm256_set1_ps(-INFINITY);
  __m256 m = lowest;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
  if (j < n) {
    const __m256i k = tail_mask(n - j);
    m = _mm256_max_ps(m, _mm256_blendv_ps(lowest, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k)));
  }
  return lanes_max(m);
}

SHARDPLAN_AVX2 float exp_affine_sum_avx2(const float* x, float scale, float shift, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(scale), b = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Sleef_expf8_u10avx2(_mm256_fmsub_ps(_mm256_loadu_ps(x + j), a, b));
    _mm256_storeu_ps(y + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    const __m256i k = tail_mask(n - j);
    const __m256 e =
        _mm256_and_ps(Sleef_expf8_u10avx2(_mm256_fmsub_ps(_mm256_maskload_ps(x + j, k), a, b)), _mm256_castsi256_ps(k));
    _mm256_maskstore_ps(y + j, k, e);
    acc = _mm256_add_ps(acc, e);
  }
  return lanes_sum(acc);
}

SHARDPLAN_AVX2 void scale_row_avx2(float* y, float a, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), va));
  if (j < n) {
    const __m256i k = tail_mask(n - j);
    _mm256_maskstore_ps(y + j, k, _mm256_mul_ps(_mm256_maskload_ps(y + j, k), va));
  }
}

SHARDPLAN_AVX2 float row_dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  if (j < n) {
    const __m256i k = tail_mask(n - j);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + j, k), _mm256_maskload_ps(b + j, k), acc);
  }
  return lanes_sum(acc);
}

SHARDPLAN_AVX2 void softmax_grad_row_avx2(const float* y, const float* dy, float d, float a, float* dx, int64_t n) {
  const __m256 vd = _mm256_set1_ps(d), va = _mm256_set1_ps(a);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dy + j), vd);
    _mm256_storeu_ps(dx + j, _mm256_mul_ps(_mm256_mul_ps(va, _mm256_loadu_ps(y + j)), g));
  }
  if (j < n) {
    const __m256i k = tail_mask(n - j);
    const __m256 g = _mm256_sub_ps(_mm256_maskload_ps(dy + j, k), vd);
    _mm256_maskstore_ps(dx + j, k, _mm256_mul_ps(_mm256_mul_ps(va, _mm256_maskload_ps(y + j, k)), g));
  }
}

// sigmoid(x) = 1 / (1 + exp(-x)) on 8 lanes.
SHARDPLAN_AVX2 __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0F);
  return _mm256_div_ps(one, _mm256_add_ps(one, Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

SHARDPLAN_AVX2 void swiglu_forward_row_avx2(const float* g, const float* u, float* s, float* y, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 gv = _mm256_loadu_ps(g + j), sv = _mm256_mul_ps(gv, sigmoid8(gv));
    _mm256_storeu_ps(s + j, sv);
    _mm256_storeu_ps(y + j, _mm256_mul_ps(sv, _mm256_loadu_ps(u + j)));
  }
  if (j < n) swiglu_forward_row_plain(g + j, u + j, s + j, y + j, n - j);
}

SHARDPLAN_AVX2 void swiglu_backward_row_avx2(const float* dy, const float* g, const float* u, const float* s, float* dg,
                                             float* du, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0F);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 sig = sigmoid8(_mm256_loadu_ps(g + j)), sv = _mm256_loadu_ps(s + j), d = _mm256_loadu_ps(dy + j);
    const __m256 dsilu = _mm256_fmadd_ps(sv, _mm256_sub_ps(one, sig), sig);
    _mm256_storeu_ps(dg + j, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(u + j)), dsilu));
    _mm256_storeu_ps(du + j, _mm256_mul_ps(d, sv));
  }
  if (j < n) swiglu_backward_row_plain(dy + j, g + j, u + j, s + j, dg + j, du + j, n - j);
}

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

}  // namespace

bool row_math_vectorised() {
#ifdef SHARDPLAN_ROW_AVX2
  return cpu_has_avx2_fma();
#else
  return false;
#endif
}

#ifdef SHARDPLAN_ROW_AVX2
#define SHARDPLAN_ROW_DISPATCH(name, ...) \
  return cpu_has_avx2_fma() ? name##_avx2(__VA_ARGS__) : name##_plain(__VA_ARGS__)
#else
#define SHARDPLAN_ROW_DISPATCH(name, ...) return name##_plain(__VA_ARGS__)
#endif

float row_max(const float* x, int64_t n) { SHARDPLAN_ROW_DISPATCH(row_max, x, n); }
float exp_affine_sum(const float* x, float scale, float shift, float* y, int64_t n) {
  SHARDPLAN_ROW_DISPATCH(exp_affine_sum, x, scale, shift, y, n);
}
void scale_row(float* y, float a, int64_t n) { SHARDPLAN_ROW_DISPATCH(scale_row, y, a, n); }
float row_dot(const float* a, const float* b, int64_t n) { SHARDPLAN_ROW_DISPATCH(row_dot, a, b, n); }
void softmax_grad_row(const float* y, const float* dy, float d, float a, float* dx, int64_t n) {
  SHARDPLAN_ROW_DISPATCH(softmax_grad_row, y, dy, d, a, dx, n);
}

void swiglu_forward_row(const float* g, const float* u, float* s, float* y, int64_t n) {
  SHARDPLAN_ROW_DISPATCH(swiglu_forward_row, g, u, s, y, n);
}
void swiglu_backward_row(const float* dy, const float* g, const float* u, const float* s, float* dg, float* du,
                         int64_t n) {
  SHARDPLAN_ROW_DISPATCH(swiglu_backward_row, dy, g, u, s, dg, du, n);
}

#undef SHARDPLAN_ROW_DISPATCH

}  // namespace shardplan::executor::cpu
