#pragma once
// Dynamic loss scaling for fp16 (Micikevicius et al. 2018, "Mixed Precision Training", §3.2;
// torch.cuda.amp.GradScaler's rule): multiply the loss by `scale`; on non-finite gradients
// skip the step and halve the scale; after `growth_interval` good steps in a row double it.
#include <cstdint>

namespace shardplan::executor {

struct LossScaler {
  bool enabled = false;
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t good_steps = 0;

  [[nodiscard]] double loss_multiplier() const { return enabled ? scale : 1.0; }
  // After the gradients are checked; returns whether the optimizer step was taken.
  bool update(bool finite) {
    if (!enabled) return finite;
    if (!finite) {
      scale *= backoff_factor;
      good_steps = 0;
      return false;
    }
    if (++good_steps >= growth_interval) {
      scale *= growth_factor;
      good_steps = 0;
    }
    return true;
  }
};

}  // namespace shardplan::executor
