#pragma once
// The run device: chosen once per rank (`--device auto|cpu|cuda`), then every tensor the
// executor creates lives there. Also what a run reports about it: its name, its peak tensor
// memory (CPU: the accounting allocator of metrics/memory_accounting.hpp; CUDA: the caching
// allocator's statistics) and step timing (CPU: the steady clock; CUDA: events on the current
// stream, so queued kernels are counted where they run).
//
// The CUDA half lives in metrics/cuda_stats.cpp, compiled only against a CUDA LibTorch
// (SHARDPLAN_WITH_CUDA); a CPU build reports CPU figures and refuses `--device cuda`.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace shardplan::executor {

// auto: CUDA device `local_rank` when LibTorch sees at least `local_size` devices (one GPU per
// rank on the node), else the CPU; cuda: the same, an InputError when there are too few. `training`: also needs this
// build's CUDA support (the NCCL backend and metrics/cuda_stats); a kernel benchmark (shardrun profile) only needs
// LibTorch's. Throws InputError naming
// --device for an unknown choice, or for `cuda` without a usable GPU.
torch::Device pick_device(const std::string& want, int local_rank, int local_size, bool training);
// Makes `d` the current CUDA device (no-op on the CPU): NCCL communicators bind to it.
void make_current(torch::Device d);
// Whether this shardrun can train on CUDA (built against a CUDA LibTorch, with NCCL).
[[nodiscard]] bool cuda_build();

// "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)".
[[nodiscard]] std::string describe_device(torch::Device d);
// "cpu-accounting-allocator" or "cuda-caching-allocator".
[[nodiscard]] std::string memory_source(torch::Device d);
// Peak / current bytes of live tensors on `d` since the last reset.
[[nodiscard]] int64_t peak_device_bytes(torch::Device d);
[[nodiscard]] int64_t current_device_bytes(torch::Device d);
void reset_peak_device_bytes(torch::Device d);
// Waits for the work queued on `d`'s current stream so far (CUDA; a no-op on the CPU): host-timed
// phases after it count their own kernels, not the compute backlog of the phase before
// (collectives in flight on NCCL's side streams are not waited for).
void synchronize_device(torch::Device d);

// Elapsed seconds since start(): wall clock on the CPU, CUDA events on CUDA (seconds() waits
// for the work queued so far to finish).
class StepTimer {
 public:
  explicit StepTimer(torch::Device d);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  void start();
  [[nodiscard]] double seconds();

 private:
  struct Events;
  torch::Device device_;
  std::chrono::steady_clock::time_point t0_;
  std::unique_ptr<Events> events_;  // CUDA only
};

}  // namespace shardplan::executor
