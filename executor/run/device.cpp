#include "device.hpp"

#include <torch/cuda.h>

#include "executor/errors.hpp"
#include "executor/metrics/memory_accounting.hpp"
#ifdef SHARDPLAN_WITH_CUDA
#include "executor/metrics/cuda_stats.hpp"
#endif

namespace shardplan::executor {

namespace {

using Clock = std::chrono::steady_clock;

[[maybe_unused]] [[noreturn]] void no_cuda_build() {
  throw ExecutorError("a CUDA device in a shardrun built without CUDA support", __FILE__, __LINE__);
}

}  // namespace

bool cuda_build() {
#if defined(SHARDPLAN_WITH_CUDA) && defined(SHARDPLAN_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

torch::Device pick_device(const std::string& want, int local_rank, int local_size, bool training) {
  if (want != "auto" && want != "cpu" && want != "cuda")
    throw InputError("--device: expected auto, cpu or cuda, got '" + want + "'");
  if (want == "cpu") return torch::Device(torch::kCPU);
  const bool built = cuda_build() || !training;
  const bool have_cuda = built && torch::cuda::is_available();
  if (want == "cuda" && !have_cuda)
    throw InputError(built ? std::string("--device cuda: LibTorch sees no CUDA device on this machine")
                           : std::string("--device cuda: this shardrun was built without CUDA support (CPU LibTorch "
                                         "or no NCCL); use --device cpu, or build against a CUDA LibTorch "
                                         "(scripts/gpu-run.sh)"));
  if (!have_cuda) return torch::Device(torch::kCPU);
  const auto n = static_cast<int>(torch::cuda::device_count());
  if (n < local_size) {
    if (want == "auto") return torch::Device(torch::kCPU);
    throw InputError("--device cuda: " + std::to_string(local_size) + " ranks on this node but " + std::to_string(n) +
                     " visible CUDA device(s); one GPU per rank (start fewer ranks per node)");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

void make_current(torch::Device d) {
  if (!d.is_cuda()) return;
#ifdef SHARDPLAN_WITH_CUDA
  cuda_stats::set_device(d.index());
#else
  no_cuda_build();
#endif
}

std::string describe_device(torch::Device d) {
  if (!d.is_cuda()) return "cpu";
#ifdef SHARDPLAN_WITH_CUDA
  return "cuda:" + std::to_string(d.index()) + " (" + cuda_stats::device_name(d.index()) + ")";
#else
  no_cuda_build();
#endif
}

std::string memory_source(torch::Device d) {
  return d.is_cuda() ? "cuda-caching-allocator" : "cpu-accounting-allocator";
}

int64_t peak_device_bytes(torch::Device d) {
  if (!d.is_cuda()) return peak_tensor_bytes();
#ifdef SHARDPLAN_WITH_CUDA
  return cuda_stats::peak_allocated_bytes(d.index());
#else
  no_cuda_build();
#endif
}

int64_t current_device_bytes(torch::Device d) {
  if (!d.is_cuda()) return current_tensor_bytes();
#ifdef SHARDPLAN_WITH_CUDA
  return cuda_stats::current_allocated_bytes(d.index());
#else
  no_cuda_build();
#endif
}

void reset_peak_device_bytes(torch::Device d) {
  if (!d.is_cuda()) return reset_peak_tensor_bytes();
#ifdef SHARDPLAN_WITH_CUDA
  cuda_stats::reset_peak(d.index());
#else
  no_cuda_build();
#endif
}

void synchronize_device(torch::Device d) {
  if (!d.is_cuda()) return;
#ifdef SHARDPLAN_WITH_CUDA
  cuda_stats::synchronize_current_stream(d.index());
#else
  no_cuda_build();
#endif
}

struct StepTimer::Events {
#ifdef SHARDPLAN_WITH_CUDA
  explicit Events(int device) : timer(device) {}
  cuda_stats::EventTimer timer;
#endif
};

StepTimer::StepTimer(torch::Device d) : device_(d) {
  if (!d.is_cuda()) return;
#ifdef SHARDPLAN_WITH_CUDA
  events_ = std::make_unique<Events>(d.index());
#else
  no_cuda_build();
#endif
}

StepTimer::~StepTimer() = default;

void StepTimer::start() {
  t0_ = Clock::now();
#ifdef SHARDPLAN_WITH_CUDA
  if (events_) events_->timer.start();
#endif
}

double StepTimer::seconds() {
#ifdef SHARDPLAN_WITH_CUDA
  if (events_) return events_->timer.stop();
#endif
  return std::chrono::duration<double>(Clock::now() - t0_).count();
}

}  // namespace shardplan::executor
