// shardrun's fp32 CPU GEMMs (executor/model/cpu_gemm.hpp): each backend this build has against a
// float64 product, in every layout training hands over (contiguous, transposed views, a column
// slice whose rows lie further apart than its width), added into an accumulator (beta = 1), as
// a linear over a 3-D input, batched over strided 4-D views; operands sgemm cannot take go to LibTorch; a backend name
// it does not know is refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "executor/errors.hpp"
#include "executor/model/cpu_gemm.hpp"

namespace shardplan::executor {
namespace cpu_gemm_test {  // named, not anonymous: the files share a unity-build unit

// |a - ref| <= 1e-5 |ref|_max: any correctly rounded fp32 GEMM of these sizes.
void expect_near(const torch::Tensor& a, const torch::Tensor& ref, const std::string& what) {
  ASSERT_EQ(a.sizes(), ref.sizes()) << what;
  const double err = (a.to(torch::kDouble) - ref).abs().max().item<double>();
  EXPECT_LE(err, 1e-5 * ref.abs().max().item<double>()) << what;
}

std::vector<cpu::GemmBackend> backends() {
  std::vector<cpu::GemmBackend> out;
  if (cpu::blas_available()) out.push_back(cpu::GemmBackend::blas);
  if (cpu::onednn_available()) out.push_back(cpu::GemmBackend::onednn);
  return out;
}

// Restores the process's default backend after each test.
struct CpuGemmTest : ::testing::Test {
  void TearDown() override { cpu::configure_cpu_gemm(1); }
};

TEST_F(CpuGemmTest, EveryBackendMatchesADoubleProductInEveryLayout) {
  if (backends().empty()) GTEST_SKIP() << "built with neither oneDNN nor CBLAS";
  torch::manual_seed(3);
  const int64_t M = 37, K = 53, N = 29;
  const torch::Tensor a = torch::randn({M, K}), at = torch::randn({K, M}).t();           // at: a transposed view
  const torch::Tensor wide = torch::randn({M, K + 11}), a_slice = wide.narrow(1, 5, K);  // rows K + 11 apart
  const torch::Tensor b = torch::randn({K, N}), bt = torch::randn({N, K}).t();
  const auto d = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  for (const cpu::GemmBackend be : backends()) {
    cpu::use_cpu_gemm(be, 1);
    const std::string name = be == cpu::GemmBackend::blas ? "blas" : "onednn";
    for (const torch::Tensor* x : {&a, &at, &a_slice})
      for (const torch::Tensor* y : {&b, &bt}) expect_near(cpu::mm(*x, *y), torch::mm(d(*x), d(*y)), name + " mm");
    // c += a b into an accumulator already holding values (a weight gradient's second micro-batch).
    const torch::Tensor c0 = torch::randn({M, N});
    torch::Tensor c = c0.clone();
    cpu::addmm_(c, at, bt);
    expect_near(c, d(c0) + torch::mm(d(at), d(bt)), name + " addmm_");
    // A linear over (B, S, K): x w^T with w (N, K).
    const torch::Tensor x = torch::randn({3, 5, K}), w = torch::randn({N, K});
    expect_near(cpu::linear(x, w), torch::matmul(d(x), d(w).t()), name + " linear");
    // Batched as the ring attention calls it: (B, g, rows, hd) against a narrowed, transposed
    // (B, g, hd, keys) view of a (B, g, S, hd) tensor.
    const torch::Tensor q4 = torch::randn({2, 3, 10, 8}), k4 = torch::randn({2, 3, 16, 8}).narrow(2, 4, 9);
    expect_near(cpu::bmm(q4, k4.transpose(-2, -1)), torch::matmul(d(q4), d(k4).transpose(-2, -1)), name + " bmm");
  }
}

TEST_F(CpuGemmTest, OperandsSgemmCannotTakeGoToLibTorch) {
  torch::manual_seed(4);
  const torch::Tensor every_other = torch::randn({16, 24}).slice(1, 0, 24, 2);  // column stride 2
  const torch::Tensor b = torch::randn({12, 7});
  expect_near(cpu::mm(every_other, b), torch::mm(every_other.to(torch::kDouble), b.to(torch::kDouble)), "strided");
  const torch::Tensor h = torch::randn({8, 12}).to(torch::kBFloat16), hb = b.to(torch::kBFloat16);
  const torch::Tensor y = cpu::mm(h, hb);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, torch::mm(h, hb)));  // LibTorch's own kernel, bit for bit
}

TEST_F(CpuGemmTest, AnUnknownBackendIsRefusedByName) {
  ::setenv("SHARDRUN_CPU_GEMM", "mkl", 1);
  try {
    cpu::configure_cpu_gemm(1);
    ADD_FAILURE() << "SHARDRUN_CPU_GEMM=mkl accepted";
  } catch (const ExecutorError& e) {
    EXPECT_NE(std::string(e.what()).find("SHARDRUN_CPU_GEMM: expected blas or onednn, got 'mkl'"), std::string::npos)
        << e.what();
  }
  ::unsetenv("SHARDRUN_CPU_GEMM");
}

}  // namespace cpu_gemm_test
}  // namespace shardplan::executor
