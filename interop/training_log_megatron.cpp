// Megatron-LM / Megatron-Core logs (megatron/training/training.py, training_log; checked at
// NVIDIA/Megatron-LM d98e8a64, 2026-08-22). The last rank prints, every --log-interval
// iterations and at the first:
//   " [2026-08-22 10:00:41.512337] iteration        1/       2 | consumed samples:   128 |
//    elapsed time per iteration (ms): 38512.4 | throughput per GPU (TFLOP/s/GPU): 205.3 | ...
//    | lm loss: 1.187661E+01 | ..."
// and every data-parallel rank 0 prints, after the first iterations (utils/common_utils.py,
// report_memory):
//   "[Rank 0] (after 1 iterations) memory (MB) | allocated: 46213.38 | max allocated: 61877.02 | ..."
// "elapsed time per iteration" is the interval's average wall time per iteration.
#include <algorithm>
#include <cmath>

#include "training_log.hpp"

namespace shardplan::interop::log_detail {

void megatron_line(std::string_view text, int line, TrainingLog& log) {
  if (text.find("memory (MB)") != std::string_view::npos) {
    if (const auto max_mb = number_after(text, "| max allocated:", log.source, line))
      log.peak_bytes = std::max(log.peak_bytes.value_or(0.0), *max_mb * 1024.0 * 1024.0);
    return;
  }
  if (text.find("elapsed time per iteration (ms):") == std::string_view::npos) return;
  const auto iteration = number_after(text, " iteration ", log.source, line);
  const auto ms = number_after(text, "elapsed time per iteration (ms):", log.source, line);
  if (!iteration || !ms || *ms <= 0)
    fail_line(log.source, line,
              "expected 'iteration N/M' and a positive 'elapsed time per iteration (ms):' "
              "(Megatron training log line)");
  LogStep s;
  s.iteration = std::llround(*iteration);
  s.line = line;
  s.step_s = *ms / 1000.0;
  if (const auto tflops = number_after(text, "throughput per GPU (TFLOP/s/GPU):", log.source, line))
    s.flops_per_s_per_device = *tflops * 1e12;
  s.loss = number_after(text, "| lm loss:", log.source, line);
  log.steps.push_back(s);
}

}  // namespace shardplan::interop::log_detail
