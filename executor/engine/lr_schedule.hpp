#pragma once
// Learning rate: linear warm-up, then cosine decay to min_lr (Loshchilov & Hutter 2017,
// "SGDR", eq. 5, one cycle), as Megatron/HF "cosine with warmup". `step` is 0-based.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace shardplan::executor {

struct LrSchedule {
  double peak_lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  [[nodiscard]] double at(int64_t step) const {
    if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const int64_t decay = std::max<int64_t>(1, total_steps - warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay));
    return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
};

}  // namespace shardplan::executor
