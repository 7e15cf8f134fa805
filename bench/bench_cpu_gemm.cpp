// Google Benchmark (not a test): shardrun's two fp32 CPU GEMM backends (executor/model/cpu_gemm.hpp)
// on tiny-llama's GEMMs at the shardrun benchmark plan's 512 tokens (bench/shardrun_vs_reference.sh),
// one thread, in the layouts training calls them: forward x w^T, dgrad gy w, wgrad gy^T x added
// into the gradient (beta = 1).
//   build/release/bench/bench_cpu_gemm [--benchmark_filter=...]
// Reports FLOP/s per shape and backend ("blas": the CBLAS LibTorch calls; "onednn": dnnl_sgemm).
#include <benchmark/benchmark.h>

#include <array>

#include "executor/model/cpu_gemm.hpp"
#include "executor/run/threads.hpp"

namespace {

namespace cpu = shardplan::executor::cpu;

// {M, N, K, layout}: layout 0 forward (x (M,K), w (N,K)), 1 dgrad (gy (M,K), w (K,N)), 2 wgrad (gy^T (M,K) view, x
// (K,N)).
constexpr std::array<std::array<int64_t, 4>, 7> kShapes{{
    {512, 688, 256, 0},   // gate / up projection
    {512, 256, 688, 1},   // down projection's input gradient
    {688, 256, 512, 2},   // gate / up weight gradient
    {512, 128, 256, 0},   // k / v projection (GQA)
    {512, 256, 256, 0},   // q / o projection
    {512, 4096, 256, 0},  // LM head
    {4096, 256, 512, 2},  // LM head weight gradient
}};

void Gemm(benchmark::State& state) {
  const auto backend = state.range(0) == 0 ? cpu::GemmBackend::blas : cpu::GemmBackend::onednn;
  if (backend == cpu::GemmBackend::onednn && !cpu::onednn_available()) {
    state.SkipWithError("built without oneDNN");
    return;
  }
  shardplan::executor::configure_threads(1, 1);  // LibTorch's, OpenMP's and OpenBLAS's pools: one thread
  cpu::use_cpu_gemm(backend, 1);
  const auto& [M, N, K, layout] = kShapes[static_cast<size_t>(state.range(1))];
  const torch::Tensor a = layout == 2 ? torch::randn({K, M}) : torch::randn({M, K});
  const torch::Tensor b = layout == 0 ? torch::randn({N, K}) : torch::randn({K, N});
  torch::Tensor c = torch::zeros({M, N});
  for (auto _ : state) {
    if (layout == 0) benchmark::DoNotOptimize(cpu::linear(a, b));
    if (layout == 1) benchmark::DoNotOptimize(cpu::mm(a, b));
    if (layout == 2) cpu::addmm_(c, a.t(), b);
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(backend == cpu::GemmBackend::blas ? "blas " : "onednn ") + std::to_string(M) + "x" +
                 std::to_string(N) + "x" + std::to_string(K) +
                 (layout == 0   ? " fwd"
                  : layout == 1 ? " dgrad"
                                : " wgrad"));
}
BENCHMARK(Gemm)->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4, 5, 6}})->ArgNames({"backend", "shape"});

}  // namespace

BENCHMARK_MAIN();
