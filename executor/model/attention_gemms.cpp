#include "attention_gemms.hpp"

#include <algorithm>
#include <cstring>

#include "executor/errors.hpp"

#include "cpu_gemm.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Matrix (b, h) of a (B, n, rows, cols) tensor with unit column stride: rows at stride `ld`.
struct Heads {
  float* data;
  int64_t s0, s1, ld;
  [[nodiscard]] float* at(int64_t b, int64_t h) const { return data + b * s0 + h * s1; }
};
Heads heads(const torch::Tensor& t) { return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.stride(2)}; }

bool sgemm_path(std::initializer_list<const torch::Tensor*> ts) {
  if (!attention_gemms_use_sgemm()) return false;
  for (const torch::Tensor* t : ts)
    if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat || t->dim() != 4 || t->stride(3) != 1) return false;
  return true;
}

// C (m x n, ldc) = op(A) op(B) + beta C, row-major (cpu_gemm.hpp's backend).
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc) {
  cpu::sgemm(ta, tb, m, n, k, 1.0F, a, lda, b, ldb, beta, c, ldc);
}

// The g query heads of a KV head stack into one (g*S, hd) matrix when q's heads lie S rows apart.
bool groups_stack(const torch::Tensor& q) { return q.stride(1) == q.size(2) * q.stride(2); }

// Row block r of `blocks` over S rows: [first, end). Causal: block r reads keys [0, end) only.
struct RowBlock {
  int64_t first, end;
};
RowBlock row_block(int64_t r, int64_t blocks, int64_t S) { return {r * S / blocks, (r + 1) * S / blocks}; }

// Rows [first, end) of a (rows, ld) row-major matrix, columns [col, ld), set to 0.
void zero_right(float* m, int64_t ld, RowBlock rows, int64_t col) {
  if (col >= ld) return;
  for (int64_t i = rows.first; i < rows.end; ++i)
    std::memset(m + i * ld + col, 0, static_cast<size_t>(ld - col) * sizeof(float));
}

struct Scores : torch::autograd::Function<Scores> {
  // q: (B, nh, S, hd), k: (B, nkv, Sk, hd) -> (B, nkv, g*S, Sk); `blocks` > 1: causal (Sk == S),
  // row block r against keys [0, its end) only, the blocks above written 0.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k, int64_t blocks) {
    const int64_t B = q.size(0), nh = q.size(1), S = q.size(2), hd = q.size(3), nkv = k.size(1), Sk = k.size(2);
    const int64_t g = nh / nkv;
    torch::Tensor out = torch::empty({B, nkv, g * S, Sk}, q.options());
    const Heads Q = heads(q), K = heads(k), O = heads(out);
    const bool stacked = blocks == 1 && groups_stack(q);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kv = 0; kv < nkv; ++kv)
        for (int64_t j = 0; j < (stacked ? 1 : g); ++j) {  // S_j = Q_j K^T
          float* o = O.at(b, kv) + j * S * Sk;
          if (blocks == 1) {
            gemm(false, true, stacked ? g * S : S, Sk, hd, Q.at(b, kv * g + j), Q.ld, K.at(b, kv), K.ld, 0.0F, o, Sk);
            continue;
          }
          for (int64_t r = 0; r < blocks; ++r) {
            const RowBlock rb = row_block(r, blocks, S);
            gemm(false, true, rb.end - rb.first, rb.end, hd, Q.at(b, kv * g + j) + rb.first * Q.ld, Q.ld, K.at(b, kv),
                 K.ld, 0.0F, o + rb.first * Sk, Sk);
            zero_right(o, Sk, rb, rb.end);
          }
        }
    ctx->save_for_backward({q, k});
    ctx->saved_data["blocks"] = blocks;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1];
    const int64_t blocks = ctx->saved_data["blocks"].toInt();
    const torch::Tensor ds = grads[0].contiguous();  // (B, nkv, g*S, Sk); causal: 0 above the diagonal
    const int64_t B = q.size(0), nh = q.size(1), S = q.size(2), hd = q.size(3), nkv = k.size(1), Sk = k.size(2);
    const int64_t g = nh / nkv;
    torch::Tensor dq = torch::empty({B, nh, S, hd}, q.options()), dk = torch::empty({B, nkv, Sk, hd}, k.options());
    const Heads Q = heads(q), K = heads(k), DS = heads(ds), DQ = heads(dq), DK = heads(dk);
    const bool stacked = blocks == 1 && groups_stack(q);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kv = 0; kv < nkv; ++kv) {
        if (blocks == 1) {
          // dQ (g*S, hd) = dS K: dq's heads are S rows apart, so the group is one GEMM.
          gemm(false, false, g * S, hd, Sk, DS.at(b, kv), Sk, K.at(b, kv), K.ld, 0.0F, DQ.at(b, kv * g), hd);
          // dK (Sk, hd) = sum_j dS_j^T Q_j
          for (int64_t j = 0; j < (stacked ? 1 : g); ++j)
            gemm(true, false, Sk, hd, stacked ? g * S : S, DS.at(b, kv) + j * S * Sk, Sk, Q.at(b, kv * g + j), Q.ld,
                 j == 0 ? 0.0F : 1.0F, DK.at(b, kv), hd);
          continue;
        }
        for (int64_t j = 0; j < g; ++j) {
          const float* dsj = DS.at(b, kv) + j * S * Sk;
          const float* qj = Q.at(b, kv * g + j);
          for (int64_t r = 0; r < blocks; ++r) {
            const RowBlock rb = row_block(r, blocks, S);
            // dQ_j rows of block r = dS_j[rows, 0..end) K[0..end)
            gemm(false, false, rb.end - rb.first, hd, rb.end, dsj + rb.first * Sk, Sk, K.at(b, kv), K.ld, 0.0F,
                 DQ.at(b, kv * g + j) + rb.first * hd, hd);
            // dK[keys of block r] += dS_j[first..S, keys]^T Q_j[first..S]: no query before them sees them
            gemm(true, false, rb.end - rb.first, hd, S - rb.first, dsj + rb.first * Sk + rb.first, Sk,
                 qj + rb.first * Q.ld, Q.ld, j == 0 ? 0.0F : 1.0F, DK.at(b, kv) + rb.first * hd, hd);
          }
        }
      }
    return {dq, dk, torch::Tensor()};
  }
};

struct Values : torch::autograd::Function<Values> {
  // p: (B, nkv, g*S, Sk), v: (B, nkv, Sk, hd) -> (B, S, nh*hd); `blocks` > 1: causal, p 0 above
  // the diagonal, so row block r reads keys [0, its end) only; dp above the blocks is written 0.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& p_in, const torch::Tensor& v, int64_t nh,
                               int64_t blocks) {
    const torch::Tensor p = p_in.contiguous();
    const int64_t B = p.size(0), nkv = p.size(1), Sk = p.size(3), hd = v.size(3);
    const int64_t g = nh / nkv, S = p.size(2) / g;
    torch::Tensor out = torch::empty({B, S, nh * hd}, v.options());
    const Heads P = heads(p), V = heads(v);
    float* o = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kv = 0; kv < nkv; ++kv)
        for (int64_t j = 0; j < g; ++j)  // context of head kv*g + j = P_j V, into its columns
          for (int64_t r = 0; r < blocks; ++r) {
            const RowBlock rb = row_block(r, blocks, S);  // blocks == 1: all S rows against all Sk keys
            gemm(false, false, rb.end - rb.first, hd, blocks == 1 ? Sk : rb.end, P.at(b, kv) + (j * S + rb.first) * Sk,
                 Sk, V.at(b, kv), V.ld, 0.0F, o + (b * S + rb.first) * nh * hd + (kv * g + j) * hd, nh * hd);
          }
    ctx->save_for_backward({p, v});
    ctx->saved_data["blocks"] = blocks;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &p = saved[0], &v = saved[1];
    const int64_t blocks = ctx->saved_data["blocks"].toInt();
    const torch::Tensor dout = grads[0].contiguous();  // (B, S, nh*hd)
    const int64_t B = p.size(0), nkv = p.size(1), Sk = p.size(3), hd = v.size(3), S = dout.size(1);
    const int64_t g = p.size(2) / S, nh = g * nkv, ld = nh * hd;
    torch::Tensor dp = torch::empty_like(p), dv = torch::empty({B, nkv, Sk, hd}, v.options());
    const Heads P = heads(p), V = heads(v), DP = heads(dp), DV = heads(dv);
    const float* d = dout.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kv = 0; kv < nkv; ++kv)
        for (int64_t j = 0; j < g; ++j) {
          const float* dj = d + b * S * ld + (kv * g + j) * hd;  // dO_j: (S, hd), rows nh*hd apart
          const float* pj = P.at(b, kv) + j * S * Sk;
          float* dpj = DP.at(b, kv) + j * S * Sk;
          const float beta = j == 0 ? 0.0F : 1.0F;
          if (blocks == 1) {
            gemm(false, true, S, Sk, hd, dj, ld, V.at(b, kv), V.ld, 0.0F, dpj, Sk);
            gemm(true, false, Sk, hd, S, pj, Sk, dj, ld, beta, DV.at(b, kv), hd);
            continue;
          }
          for (int64_t r = 0; r < blocks; ++r) {
            const RowBlock rb = row_block(r, blocks, S);
            // dP_j[rows, 0..end) = dO_j[rows] V[0..end)^T; the rest of the rows is 0
            gemm(false, true, rb.end - rb.first, rb.end, hd, dj + rb.first * ld, ld, V.at(b, kv), V.ld, 0.0F,
                 dpj + rb.first * Sk, Sk);
            zero_right(dpj, Sk, rb, rb.end);
            // dV[keys of block r] += P_j[first..S, keys]^T dO_j[first..S]
            gemm(true, false, rb.end - rb.first, hd, S - rb.first, pj + rb.first * Sk + rb.first, Sk,
                 dj + rb.first * ld, ld, beta, DV.at(b, kv) + rb.first * hd, hd);
          }
        }
    return {dp, dv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool attention_gemms_use_sgemm() { return cpu::sgemm_available(); }

int64_t causal_row_blocks(int64_t S) { return std::clamp<int64_t>(S / 32, 1, 16); }

torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal) {
  const int64_t B = q.size(0), nh = q.size(1), S = q.size(2), hd = q.size(3), nkv = k.size(1);
  EXECUTOR_CHECK(nkv > 0 && nh % nkv == 0 && k.size(0) == B && k.size(3) == hd, "attention_scores: bad shapes");
  if (sgemm_path({&q, &k})) return Scores::apply(q, k, causal && k.size(2) == S ? causal_row_blocks(S) : 1);
  return torch::matmul(q.reshape({B, nkv, nh / nkv * S, hd}), k.transpose(-2, -1));
}

torch::Tensor attention_values(const torch::Tensor& p, const torch::Tensor& v, int64_t nh, bool causal) {
  const int64_t B = p.size(0), nkv = p.size(1), Sk = p.size(3), hd = v.size(3);
  EXECUTOR_CHECK(v.size(0) == B && v.size(1) == nkv && v.size(2) == Sk && nh % nkv == 0 && p.size(2) % (nh / nkv) == 0,
                 "attention_values: bad shapes");
  const int64_t S = p.size(2) / (nh / nkv);
  if (sgemm_path({&p, &v})) return Values::apply(p, v, nh, causal && Sk == S ? causal_row_blocks(S) : 1);
  return torch::matmul(p, v).view({B, nh, S, hd}).transpose(1, 2).reshape({B, S, nh * hd});
}

}  // namespace shardplan::executor
