#include "cpu_kernels.hpp"

#include "row_math.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace shardplan::executor::cpu {

namespace {

// Rows per task: fixed, so that dw's partial sums (and so the result) do not depend on the
// thread count.
constexpr int64_t kRowBlock = 64;
constexpr int64_t kElementBlock = 1 << 14;  // elements per task of the elementwise loops

float dot8(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // eight lanes the compiler keeps in a vector register
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void rms_norm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t hidden, float eps) {
  at::parallel_for(0, rows, kRowBlock, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict xr = x + r * hidden;
      float* __restrict yr = y + r * hidden;
      const float inv = 1.0F / std::sqrt(dot8(xr, xr, hidden) / static_cast<float>(hidden) + eps);
      rstd[r] = inv;
      for (int64_t j = 0; j < hidden; ++j) yr[j] = w[j] * (xr[j] * inv);
    }
  });
}

void rms_norm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t rows, int64_t hidden) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial(dw ? static_cast<size_t>(blocks * hidden) : 0, 0.0F);  // dw per row block
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> gw(static_cast<size_t>(hidden)), n(static_cast<size_t>(hidden));
    for (int64_t b = b0; b < b1; ++b) {
      float* __restrict acc = dw ? partial.data() + b * hidden : nullptr;
      for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
        const float* __restrict xr = x + r * hidden;
        const float* __restrict gr = dy + r * hidden;
        float* __restrict dxr = dx + r * hidden;
        const float inv = rstd[r];
        for (int64_t j = 0; j < hidden; ++j) {
          n[static_cast<size_t>(j)] = xr[j] * inv;
          gw[static_cast<size_t>(j)] = gr[j] * w[j];
        }
        const float mean = dot8(gw.data(), n.data(), hidden) / static_cast<float>(hidden);
        for (int64_t j = 0; j < hidden; ++j)
          dxr[j] = inv * (gw[static_cast<size_t>(j)] - n[static_cast<size_t>(j)] * mean);
        if (acc)
          for (int64_t j = 0; j < hidden; ++j) acc[j] += gr[j] * n[static_cast<size_t>(j)];
      }
    }
  });
  if (!dw) return;
  std::fill(dw, dw + hidden, 0.0F);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < hidden; ++j) dw[j] += partial[static_cast<size_t>(b * hidden + j)];
}

void rotary(HeadView x, HeadView y, const float* cos, const float* sin, int64_t B, int64_t heads, int64_t S, int64_t hd,
            int64_t rot, bool inverse) {
  const int64_t half = rot / 2;
  at::parallel_for(0, B * heads * S, 256, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t % S, h = (t / S) % heads, b = t / (S * heads);
      const float* __restrict xi = x.data + b * x.s0 + h * x.s1 + s * x.s2;
      float* __restrict yo = y.data + b * y.s0 + h * y.s1 + s * y.s2;
      const float* __restrict c = cos + s * rot;
      const float* __restrict sn = sin + s * rot;
      if (!inverse) {
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = xi[i], x2 = xi[i + half];
          yo[i] = x1 * c[i] - x2 * sn[i];
          yo[i + half] = x2 * c[i + half] + x1 * sn[i + half];
        }
      } else {  // the transpose of [[c, -s], [s', c']]
        for (int64_t i = 0; i < half; ++i) {
          const float g1 = xi[i], g2 = xi[i + half];
          yo[i] = g1 * c[i] + g2 * sn[i + half];
          yo[i + half] = g2 * c[i + half] - g1 * sn[i];
        }
      }
      for (int64_t i = rot; i < hd; ++i) yo[i] = xi[i];
    }
  });
}

void causal_softmax_forward(const float* x, float* y, int64_t rows, int64_t S, float scale) {
  at::parallel_for(0, rows, kRowBlock, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t keys = r % S + 1;  // query position r mod S sees keys 0..r mod S
      const float* xr = x + r * S;
      float* yr = y + r * S;
      const float m = row_max(xr, keys);  // the max of scale * x is scale * max x (scale > 0)
      scale_row(yr, 1.0F / exp_affine_sum(xr, scale, scale * m, yr, keys), keys);
      std::memset(yr + keys, 0, static_cast<size_t>(S - keys) * sizeof(float));
    }
  });
}

void causal_softmax_backward(const float* dy, const float* y, float* dx, int64_t rows, int64_t S, float scale) {
  at::parallel_for(0, rows, kRowBlock, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t keys = r % S + 1;
      const float* yr = y + r * S;
      const float* dyr = dy + r * S;
      float* dxr = dx + r * S;
      softmax_grad_row(yr, dyr, row_dot(dyr, yr, keys), scale, dxr, keys);  // y = 0 above: no terms there
      std::memset(dxr + keys, 0, static_cast<size_t>(S - keys) * sizeof(float));
    }
  });
}

void swiglu_forward(const float* g, const float* u, float* s, float* y, int64_t n) {
  at::parallel_for(0, n, kElementBlock,
                   [&](int64_t b, int64_t e) { swiglu_forward_row(g + b, u + b, s + b, y + b, e - b); });
}

void swiglu_backward(const float* dy, const float* g, const float* u, const float* s, float* dg, float* du, int64_t n) {
  at::parallel_for(0, n, kElementBlock, [&](int64_t b, int64_t e) {
    swiglu_backward_row(dy + b, g + b, u + b, s + b, dg + b, du + b, e - b);
  });
}

void exp_shifted_rows(const float* z, const float* zmax, float* ez, float* sum, int64_t rows, int64_t V,
                      int64_t valid) {
  at::parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      sum[r] = exp_affine_sum(z + r * V, 1.0F, zmax[r], ez + r * V, valid);
      std::memset(ez + r * V + valid, 0, static_cast<size_t>(V - valid) * sizeof(float));
    }
  });
}

void cross_entropy_grad_rows(float* ez, const float* coef, const float* hit, const int64_t* target, int64_t rows,
                             int64_t V) {
  at::parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      scale_row(ez + r * V, coef[r], V);
      ez[r * V + target[r]] -= hit[r];
    }
  });
}

}  // namespace shardplan::executor::cpu
