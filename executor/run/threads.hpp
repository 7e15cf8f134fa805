#pragma once
// Threads per rank, set explicitly for both LibTorch's pools and OpenBLAS (Debian's torch
// does not forward set_num_threads to OpenBLAS; two pools fighting for the cores cost ~3x,
// shared/README.md §1). ranks x threads <= cores. Subnormals are flushed to zero (threads.cpp).
#include <string>

namespace shardplan::executor {

struct ThreadSetup {
  int threads = 1;
  bool openblas = false;     // OpenBLAS found and set
  std::string blas_kernels;  // OpenBLAS's kernel set ("Haswell", "SkylakeX", ...), "" without OpenBLAS
  std::string cpu_gemm;  // what runs the fp32 CPU GEMMs (model/cpu_gemm.hpp), e.g. "oneDNN 2.6.3 sgemm (avx512_core)"
  [[nodiscard]] std::string describe() const;
};

// `requested` 0 = hardware cores / ranks on this node (at least 1).
ThreadSetup configure_threads(int requested, int ranks_on_node);

}  // namespace shardplan::executor
