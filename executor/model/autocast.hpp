#pragma once
// Autocast on the run device, over the LibTorch versions the executor builds against: 1.13's
// per-device functions (set_cpu_enabled, set_enabled for CUDA, ...) and 2.4+'s
// set_autocast_enabled(device_type, ...) (the former are deprecated there).
//
//   AutocastState::of(device)  captures the device's autocast setting
//   AutocastState::apply()     sets it (with clear_cache() when turning autocast off)
//   autocast_dtype(device)     the lower-precision dtype while autocast is on there, else none
//   compute_dtype(x)           the dtype a custom op's matmuls on x run in: autocast's, else x's
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <optional>

namespace shardplan::executor {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SHARDPLAN_AUTOCAST_BY_DEVICE_TYPE 1
#endif

struct AutocastState {
  c10::DeviceType device = c10::DeviceType::CPU;  // CPU or CUDA
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;

  static AutocastState of(c10::DeviceType d) {
    AutocastState s;
    s.device = d;
#ifdef SHARDPLAN_AUTOCAST_BY_DEVICE_TYPE
    s.enabled = at::autocast::is_autocast_enabled(d);
    s.dtype = at::autocast::get_autocast_dtype(d);
#else
    const bool cuda = d == c10::DeviceType::CUDA;
    s.enabled = cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
    s.dtype = cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
    return s;
  }

  void apply() const {
#ifdef SHARDPLAN_AUTOCAST_BY_DEVICE_TYPE
    at::autocast::set_autocast_enabled(device, enabled);
    at::autocast::set_autocast_dtype(device, dtype);
#else
    if (device == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(enabled);
      at::autocast::set_autocast_gpu_dtype(dtype);
    } else {
      at::autocast::set_cpu_enabled(enabled);
      at::autocast::set_autocast_cpu_dtype(dtype);
    }
#endif
    if (!enabled) at::autocast::clear_cache();
  }
};

inline std::optional<at::ScalarType> autocast_dtype(c10::DeviceType d) {
  const AutocastState s = AutocastState::of(d);
  return s.enabled ? std::optional<at::ScalarType>(s.dtype) : std::nullopt;
}

inline at::ScalarType compute_dtype(const torch::Tensor& x) {
  const auto d = x.device().type();
  if (d != c10::DeviceType::CPU && d != c10::DeviceType::CUDA) return x.scalar_type();
  return autocast_dtype(d).value_or(x.scalar_type());
}

}  // namespace shardplan::executor
