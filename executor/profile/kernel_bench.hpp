#pragma once
// Microbenchmarks of the kernels a transformer step is made of, on this rank's device: GEMMs
// over an (m, n, k) grid per dtype, the attention core (batched GEMMs + softmax), norms,
// elementwise ops, embedding gather, LM head, the AdamW update, a minimal op (per-kernel
// overhead) and, on CUDA, host<->device copies. Every rank runs the same sequence at the same
// time (ranks share the machine as they do in training); each timing is the slowest rank's mean
// (profile.cpp: ctx.combine), the one a synchronous step waits for.
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "profile_samples.hpp"

namespace shardplan::executor {

struct BenchContext {
  torch::Device device{torch::kCPU};
  double min_time_s = 0.05;  // per measurement (after one warm-up call)
  int min_reps = 3;
  bool quick = false;  // smaller grids (tests)
  // Combines a per-rank time over all ranks (collective; profile.cpp: the slowest rank's, and it
  // keeps each timing's slowest / fastest; identity on one rank).
  std::function<double(double)> combine;
  // Collective, both optional (one rank: absent). start_together: a barrier before each timed
  // call, so that every rank runs the same kernel at the same moment, as training's ranks do;
  // agree: true when any rank wants another call (every rank makes the same number).
  std::function<void()> start_together;
  std::function<bool(bool)> agree;
  // Collective: true when any rank was asked to stop (SIGINT/SIGTERM).
  std::function<bool()> stop_requested;
  // Progress line (rank 0 prints it).
  std::function<void(const std::string&)> progress;
};

// Thrown between measurements when a stop was requested on any rank.
struct ProfileInterrupted {};

std::vector<KernelSample> bench_kernels(const BenchContext& ctx, const std::vector<torch::ScalarType>& dtypes);

// Mean seconds of a 512 x 512 x 512 fp32 GEMM (x W^T, hot), the slowest rank's: timed at the
// start and the end of a profile, it says how much the machine's speed drifted in between.
double reference_gemm_seconds(const BenchContext& ctx);

// Per sample, the median seconds over passes of bench_kernels (the same samples in the same
// order in each).
std::vector<KernelSample> median_of_passes(const std::vector<std::vector<KernelSample>>& passes);

const char* dtype_name(torch::ScalarType t);

// The last-level cache as the OS reports it (sysfs), 0 when it does not say.
double reported_last_level_cache_bytes();

// Bytes of cache the CPU benchmarks' cold operands must overflow: training touches far more
// memory between two uses of a weight or a saved activation than the cache holds, so GEMM
// operands and the optimizer's shards come from pools twice this size, and a sweep over twice
// this runs before each backward timing. The reported last-level cache, else an assumed one,
// never 0 on a CPU.
double cold_cache_bytes();

}  // namespace shardplan::executor
