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

// Keeps freed host memory in the process for reuse (glibc malloc: no mmap'ed chunks, no heap
// trimming), as a caching allocator does. By default every block over 32 MB is mmap'ed and
// returned to the OS when freed, so each step's large tensors (gathered ZeRO-3 weights,
// gradient buckets, the embedding's gradient) page-fault on first touch again: GPT-2 with
// ZeRO-3 on 2 CPU ranks ran 1.5x slower. Tensor accounting is unaffected; the RSS stays at
// its high-water mark. Returns false when the C library refused a setting.
bool keep_freed_host_memory();

}  // namespace shardplan::executor
