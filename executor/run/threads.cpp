#include "threads.hpp"

#include <dlfcn.h>
#include <torch/torch.h>

#include "executor/model/cpu_gemm.hpp"

#include <algorithm>
#include <thread>

namespace shardplan::executor {

std::string ThreadSetup::describe() const {
  return std::to_string(threads) + " thread(s) per rank (LibTorch" +
         (openblas ? " + OpenBLAS, " + blas_kernels + " kernels" : "; OpenBLAS not found") +
         "; fp32 GEMMs: " + cpu_gemm + ")";
}

ThreadSetup configure_threads(int requested, int ranks_on_node) {
  ThreadSetup s;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  s.threads = requested > 0 ? requested : std::max(1, cores / std::max(1, ranks_on_node));
  torch::set_num_threads(s.threads);
  // Subnormal floats flushed to zero (x86 FTZ/DAZ, torch.set_flush_denormal): they take a slow
  // path in the FPU, and trained on real text (the demo's corpus) the softmaxes and small
  // gradients produce them; the demo's tp2 plan ran 2-3 % faster with it in two A/B pairs
  // (0.169 / 0.169 s against 0.173 / 0.174 s per step). Training and `shardrun profile` both
  // come through here, so the kernels are timed as training runs them.
  at::globalContext().setFlushDenormal(true);
  try {
    at::set_num_interop_threads(1);
  } catch (const std::exception&) {  // already set (a second trainer in the same process)
  }
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(s.threads);
    s.openblas = true;
    // The kernel set OpenBLAS picked when it loaded (or OPENBLAS_CORETYPE forced): a profile is
    // only good for runs on the same one.
    using CoreName = char* (*)();
    const auto core = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    const char* name = core ? core() : nullptr;
    s.blas_kernels = name ? name : "unknown";
  }
  s.cpu_gemm = cpu::configure_cpu_gemm(s.threads);
  return s;
}

}  // namespace shardplan::executor
