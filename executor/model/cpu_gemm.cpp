#include "cpu_gemm.hpp"

#include <algorithm>
#include <cstdlib>

#include "executor/errors.hpp"

#include <ATen/record_function.h>

#ifdef SHARDPLAN_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef SHARDPLAN_HAVE_CBLAS
#include <cblas.h>
#endif

namespace shardplan::executor::cpu {

namespace {

int g_threads = 1;  // the rank's thread count (configure_cpu_gemm)
GemmBackend g_backend =
#ifdef SHARDPLAN_HAVE_ONEDNN
    GemmBackend::onednn;
#else
    GemmBackend::blas;
#endif

#ifdef SHARDPLAN_HAVE_ONEDNN
std::string onednn_description() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      isa = "sse41";
      break;
    case dnnl_cpu_isa_avx:
      isa = "avx";
      break;
    case dnnl_cpu_isa_avx2:
      isa = "avx2";
      break;
    case dnnl_cpu_isa_avx512_core:
      isa = "avx512_core";
      break;
    case dnnl_cpu_isa_avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl_cpu_isa_avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl_cpu_isa_avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    default:
      isa = "isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa()));
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " sgemm (" + isa + ")";
}
#endif

// A 2-D fp32 CPU matrix as sgemm takes it: transposed or not, and its leading dimension.
struct Operand {
  bool ok = false, trans = false;
  int64_t ld = 0;
};
Operand operand(const torch::Tensor& t) {
  Operand o;
  if (!t.device().is_cpu() || t.scalar_type() != torch::kFloat || t.dim() != 2 || t.numel() == 0) return o;
  const int64_t r = t.size(0), c = t.size(1);
  if (t.stride(1) == 1 && (r == 1 || t.stride(0) >= c)) return {true, false, std::max<int64_t>(t.stride(0), c)};
  if (t.stride(0) == 1 && (c == 1 || t.stride(1) >= r)) return {true, true, std::max<int64_t>(t.stride(1), r)};
  return o;
}

// c (contiguous fp32 (M, N)) = a b + beta c, for a and b laid out as A and B say.
void gemm_into(const torch::Tensor& c, const torch::Tensor& a, const Operand& A, const torch::Tensor& b,
               const Operand& B, float beta) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  // Visible to LibTorch's profiler (shardrun --trace) as an op of its own, with its shapes.
  RECORD_FUNCTION(beta == 0.0F ? "shardrun::sgemm" : "shardrun::sgemm_add", std::vector<c10::IValue>({a, b}));
  sgemm(A.trans, B.trans, M, N, K, 1.0F, a.data_ptr<float>(), A.ld, b.data_ptr<float>(), B.ld, beta,
        c.data_ptr<float>(), N);
}

}  // namespace

bool blas_available() {
#ifdef SHARDPLAN_HAVE_CBLAS
  return true;
#else
  return false;
#endif
}

bool onednn_available() {
#ifdef SHARDPLAN_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

bool sgemm_available() { return onednn_available() || blas_available(); }

void use_cpu_gemm(GemmBackend b, int threads) {
  EXECUTOR_CHECK(b != GemmBackend::onednn || onednn_available(),
                 "SHARDRUN_CPU_GEMM=onednn: this shardrun was built without oneDNN (libdnnl-dev)");
  EXECUTOR_CHECK(b != GemmBackend::blas || blas_available(),
                 "SHARDRUN_CPU_GEMM=blas: this shardrun was built without CBLAS");
  g_backend = b;
  g_threads = std::max(1, threads);
}

std::string configure_cpu_gemm(int threads) {
  const char* env = std::getenv("SHARDRUN_CPU_GEMM");
  const std::string want = env ? env : "";
  EXECUTOR_CHECK(want.empty() || want == "blas" || want == "onednn",
                 "SHARDRUN_CPU_GEMM: expected blas or onednn, got '" + want + "'");
  if (want.empty() && !sgemm_available()) return "LibTorch mm";  // neither backend: every GEMM stays LibTorch's
  const bool onednn = want == "onednn" || (want.empty() && onednn_available());
  use_cpu_gemm(onednn ? GemmBackend::onednn : GemmBackend::blas, threads);
#ifdef SHARDPLAN_HAVE_ONEDNN
  if (g_backend == GemmBackend::onednn) return onednn_description();
#endif
  return "CBLAS sgemm";
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
#ifdef SHARDPLAN_HAVE_ONEDNN
  if (g_backend == GemmBackend::onednn) {
    // oneDNN's OpenMP regions take the calling thread's count, which LibTorch sets only on the
    // thread that called set_num_threads (the backward may run on another).
    if (omp_get_max_threads() != g_threads) omp_set_num_threads(g_threads);
    const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    EXECUTOR_CHECK(s == dnnl_success, "dnnl_sgemm failed with status " + std::to_string(static_cast<int>(s)));
    return;
  }
#endif
#ifdef SHARDPLAN_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
#else
  EXECUTOR_CHECK(false, "CPU sgemm: built with neither oneDNN nor CBLAS");
#endif
}

torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) {
  const Operand A = operand(a), B = operand(b);
  if (!sgemm_available() || !A.ok || !B.ok || a.size(1) != b.size(0)) return torch::mm(a, b);
  torch::Tensor c = torch::empty({a.size(0), b.size(1)}, a.options());
  gemm_into(c, a, A, b, B, 0.0F);
  return c;
}

void addmm_(const torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b) {
  const Operand A = operand(a), B = operand(b);
  const bool fits = sgemm_available() && A.ok && B.ok && c.dim() == 2 && c.is_contiguous() &&
                    c.scalar_type() == torch::kFloat && c.size(0) == a.size(0) && c.size(1) == b.size(1) &&
                    a.size(1) == b.size(0);
  if (fits) gemm_into(c, a, A, b, B, 1.0F);
  else const_cast<torch::Tensor&>(c).addmm_(a, b);
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& b) {
  // x: (..., K) -> (rows, K); b: (K, N), possibly a transposed view
  if (x.dim() < 1 || b.dim() != 2 || x.size(-1) != b.size(0)) return torch::matmul(x, b);
  auto out_shape = x.sizes().vec();
  out_shape.back() = b.size(1);
  return cpu::mm(x.reshape({-1, x.size(-1)}), b).view(out_shape);
}

torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b) {
  const int64_t d = a.dim();
  const bool shapes =
      d >= 3 && b.dim() == d && a.size(-1) == b.size(-2) && a.sizes().slice(0, d - 2) == b.sizes().slice(0, d - 2);
  if (!sgemm_available() || !shapes || a.numel() == 0 || b.numel() == 0) return torch::matmul(a, b);
  const auto first_matrix = [](torch::Tensor t) {  // the layout of every matrix of the batch
    while (t.dim() > 2) t = t.select(0, 0);
    return t;
  };
  const Operand A = operand(first_matrix(a)), B = operand(first_matrix(b));
  if (!A.ok || !B.ok) return torch::matmul(a, b);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  auto shape = a.sizes().vec();
  shape.back() = N;
  torch::Tensor c = torch::empty(shape, a.options());
  RECORD_FUNCTION("shardrun::sgemm_batched", std::vector<c10::IValue>({a, b}));
  // Walk the leading dims by their own strides (a and b may be views of different layouts).
  const int64_t batches = c.numel() / (M * N);
  std::vector<int64_t> idx(static_cast<size_t>(d - 2), 0);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = c.data_ptr<float>();
  for (int64_t i = 0; i < batches; ++i) {
    int64_t oa = 0, ob = 0;
    for (int64_t j = 0; j < d - 2; ++j) oa += idx[j] * a.stride(j), ob += idx[j] * b.stride(j);
    sgemm(A.trans, B.trans, M, N, K, 1.0F, pa + oa, A.ld, pb + ob, B.ld, 0.0F, pc + i * M * N, N);
    for (int64_t j = d - 3; j >= 0 && ++idx[j] == a.size(j); --j) idx[j] = 0;
  }
  return c;
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) { return cpu::matmul(x, w.t()); }

}  // namespace shardplan::executor::cpu
