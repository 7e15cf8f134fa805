#include "memory_accounting.hpp"

#include <malloc.h>

#include <limits>

#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace shardplan::executor {

namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void add(int64_t n) {
  const int64_t now = g_current.fetch_add(n) + n;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
}

// The data pointer is also the DataPtr's context (LibTorch's raw_allocate() insists on it), so
// the inner allocation and its size live in a side table keyed by the pointer.
// LibTorch 2.3 made allocate() non-const and added copy_data() (c10/core/Allocator.h).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SHARDPLAN_ALLOCATE_CONST
#define SHARDPLAN_ALLOCATOR_COPY_DATA 1
#else
#define SHARDPLAN_ALLOCATE_CONST const
#define SHARDPLAN_ALLOCATOR_COPY_DATA 0
#endif

class AccountingAllocator final : public c10::Allocator {
 public:
  explicit AccountingAllocator(c10::Allocator* inner) : inner_(inner) { self_ = this; }

  c10::DataPtr allocate(size_t n) SHARDPLAN_ALLOCATE_CONST override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.emplace(data, Entry{std::move(inner), static_cast<int64_t>(n)});
    }
    add(static_cast<int64_t>(n));
    return {data, data, &AccountingAllocator::free, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &AccountingAllocator::free; }
#if SHARDPLAN_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

 private:
  struct Entry {
    c10::DataPtr inner;  // frees through LibTorch's allocator when destroyed
    int64_t bytes;
  };
  static void free(void* data) {
    Entry entry;
    {
      std::lock_guard<std::mutex> lock(self_->mutex_);
      auto it = self_->live_.find(data);
      if (it == self_->live_.end()) return;
      entry = std::move(it->second);
      self_->live_.erase(it);
    }
    g_current.fetch_sub(entry.bytes);
  }
  static inline AccountingAllocator* self_ = nullptr;
  c10::Allocator* inner_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Entry> live_;
};

}  // namespace

void install_memory_accounting() {
  static AccountingAllocator* installed = nullptr;
  if (installed) return;
  installed = new AccountingAllocator(c10::GetCPUAllocator());  // lives for the process
  c10::SetCPUAllocator(installed, /*priority=*/100);
}

bool keep_freed_host_memory() {
#if defined(__GLIBC__)
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
  return no_mmap && no_trim;
#else
  return false;
#endif
}

int64_t current_tensor_bytes() { return g_current.load(); }
int64_t peak_tensor_bytes() { return g_peak.load(); }
void reset_peak_tensor_bytes() { g_peak.store(g_current.load()); }

}  // namespace shardplan::executor
