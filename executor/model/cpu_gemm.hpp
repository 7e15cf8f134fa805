#pragma once
// fp32 GEMMs of shardrun's CPU path: one entry point, so that training and `shardrun profile`
// time the same kernels.
//
// Two backends, picked once per process (configure_cpu_gemm, run/threads.cpp):
//   onednn  oneDNN's sgemm (dnnl_sgemm; Debian libdnnl, the oneDNN LibTorch itself is built
//           with), which picks its kernels from the CPU's instruction set at run time; the
//           default when shardrun was built with it.
//   blas    the CBLAS LibTorch calls (Debian's libblas.so.3 alternative: OpenBLAS here), whose
//           kernel set OpenBLAS picks when it loads or OPENBLAS_CORETYPE forces.
// SHARDRUN_CPU_GEMM=blas|onednn chooses; anything else is refused. On this project's 2-vCPU VM
// (AMD EPYC; the image sets OPENBLAS_CORETYPE=Haswell, so OpenBLAS runs its AVX2 kernels while
// oneDNN picks AVX-512 ones) one thread ran tiny-llama's GEMMs at 512 tokens at 123-128 GFLOP/s
// through OpenBLAS and 219-256 through oneDNN (`build/release/bench/bench_cpu_gemm`, 2026-11-28).
//
// Legend: a (M, K), b (K, N), c (M, N), fp32 row-major matrices or transposed views of them
// (rows or columns contiguous); anything else (other dtypes, devices, strides) goes to LibTorch.
#include <torch/torch.h>

#include <string>

namespace shardplan::executor::cpu {

enum class GemmBackend { blas, onednn };

// Sets the process's backend from SHARDRUN_CPU_GEMM (default: onednn when built with it, else
// blas, else none: every GEMM LibTorch's) and the threads its GEMMs use, and returns its
// description ("oneDNN 2.6.3 sgemm (avx512_core)"); throws ExecutorError for a value it does not
// know or a backend this build lacks.
std::string configure_cpu_gemm(int threads);
// Switches the backend (bench/bench_cpu_gemm.cpp times both); throws ExecutorError when this build lacks it.
void use_cpu_gemm(GemmBackend b, int threads);
[[nodiscard]] bool onednn_available();
[[nodiscard]] bool blas_available();
// Whether sgemm has a backend at all (oneDNN or CBLAS).
[[nodiscard]] bool sgemm_available();

// Row-major C = alpha op(A) op(B) + beta C on the chosen backend.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc);

// c = a b.  c: (M, N) new
torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b);
// c += a b in place (c contiguous).
void addmm_(const torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b);
// x (..., K) times b (K, N): (..., N).
torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& b);
// a (..., M, K) times b (..., K, N), the same leading dims: (..., M, N), one sgemm per matrix on
// the operands' own strides (the ring attention's blocks); anything else: torch::matmul.
torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b);
// x (..., K) times w^T for w (N, K): (..., N), the linear layer's forward.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w);

}  // namespace shardplan::executor::cpu
