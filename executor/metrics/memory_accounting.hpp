#pragma once
// Exact tensor-memory accounting on CPU: an allocator wrapped around LibTorch's CPU allocator
// that counts the bytes of every live tensor allocation (current and peak). On CUDA the
// caching allocator's own statistics are used instead (see peak_device_bytes).
#include <cstdint>

namespace shardplan::executor {

// Installs the accounting allocator as LibTorch's CPU allocator (idempotent). Tensors
// allocated before installation are not counted.
void install_memory_accounting();
[[nodiscard]] int64_t current_tensor_bytes();
[[nodiscard]] int64_t peak_tensor_bytes();
// Sets the peak to the current value (e.g. after set-up, before the steps).
void reset_peak_tensor_bytes();

}  // namespace shardplan::executor
