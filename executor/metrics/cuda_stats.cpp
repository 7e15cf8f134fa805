// CUDA figures for run/device.cpp: caching-allocator statistics, device name, event timing.
// Compiled only against a CUDA LibTorch (and, headers only, in the NCCL compile check).
#include "cuda_stats.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <stdexcept>

namespace shardplan::executor::cuda_stats {

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

c10::DeviceIndex index(int device) { return static_cast<c10::DeviceIndex>(device); }

// allocated_bytes[0]: the aggregate over the small and large pools (StatType::AGGREGATE).
auto allocated(int device) { return c10::cuda::CUDACachingAllocator::getDeviceStats(index(device)).allocated_bytes[0]; }

}  // namespace

std::string device_name(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

int64_t peak_allocated_bytes(int device) { return allocated(device).peak; }
int64_t current_allocated_bytes(int device) { return allocated(device).current; }
void reset_peak(int device) { c10::cuda::CUDACachingAllocator::resetPeakStats(index(device)); }
void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }
void synchronize_current_stream(int device) {
  check(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(index(device)).stream()), "cudaStreamSynchronize");
}

EventTimer::EventTimer(int device) : device_(device) {
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start() {
  const cudaStream_t s = c10::cuda::getCurrentCUDAStream(index(device_)).stream();
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), s), "cudaEventRecord");
}

double EventTimer::stop() {
  const cudaStream_t s = c10::cuda::getCurrentCUDAStream(index(device_)).stream();
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), s), "cudaEventRecord");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
        "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

}  // namespace shardplan::executor::cuda_stats
