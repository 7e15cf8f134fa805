#include "memory_accounting.hpp"

#include <c10/core/CPUAllocator.h>

#include <atomic>

namespace shardplan::executor {

namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void add(int64_t n) {
  const int64_t now = g_current.fetch_add(n) + n;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

class AccountingAllocator final : public c10::Allocator {
 public:
  explicit AccountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* ctx = new Context{std::move(inner), static_cast<int64_t>(n)};
    add(ctx->bytes);
    return {data, ctx, &AccountingAllocator::free, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  struct Context {
    c10::DataPtr inner;  // frees through LibTorch's allocator when destroyed
    int64_t bytes;
  };
  static void free(void* ctx) {
    auto* c = static_cast<Context*>(ctx);
    g_current.fetch_sub(c->bytes);
    delete c;
  }
  c10::Allocator* inner_;
};

}  // namespace

void install_memory_accounting() {
  static AccountingAllocator* installed = nullptr;
  if (installed) return;
  installed = new AccountingAllocator(c10::GetCPUAllocator());  // lives for the process
  c10::SetCPUAllocator(installed, /*priority=*/100);
}

int64_t current_tensor_bytes() { return g_current.load(); }
int64_t peak_tensor_bytes() { return g_peak.load(); }
void reset_peak_tensor_bytes() { g_peak.store(g_current.load()); }

}  // namespace shardplan::executor
