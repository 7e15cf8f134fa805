#pragma once
// What the executor reads from CUDA beyond LibTorch's device-generic API: the caching
// allocator's statistics, the device's name and event timing. Compiled (cuda_stats.cpp) only
// against a CUDA LibTorch; callers go through run/device.hpp. No CUDA header here.
#include <cstdint>
#include <string>

namespace shardplan::executor::cuda_stats {

[[nodiscard]] std::string device_name(int device);
// The caching allocator's allocated bytes (all pools): peak since the last reset, and current.
[[nodiscard]] int64_t peak_allocated_bytes(int device);
[[nodiscard]] int64_t current_allocated_bytes(int device);
void reset_peak(int device);
void set_device(int device);
// Waits for the device's current (compute) stream; NCCL's side streams run on.
void synchronize_current_stream(int device);

// A pair of CUDA events on the device's current stream.
class EventTimer {
 public:
  explicit EventTimer(int device);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();   // records the start event
  double stop();  // records the stop event, waits for it, returns the seconds in between

 private:
  int device_;
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

}  // namespace shardplan::executor::cuda_stats
