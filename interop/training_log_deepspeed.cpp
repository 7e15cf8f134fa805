// DeepSpeed's throughput line, printed by rank 0 every `steps_per_print` optimizer steps (and only
// when the DeepSpeed logger shows INFO: ds_config "log_level": "info"):
//   "epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=63.8, CurrSamplesPerSec=64.0,
//    MemAllocated=21.37GB, MaxMemAllocated=35.02GB"
// deepspeed/utils/timer.py, ThroughputTimer.stop (checked at deepspeed-ai/DeepSpeed master,
// 2025). Samples/s is the whole job's: the timer is built with train_batch_size (engine.py).
// MaxMemAllocated is torch.cuda.max_memory_allocated() of rank 0, GiB rounded to 0.01.
#include <cmath>

#include "training_log.hpp"

namespace shardplan::interop::log_detail {

void deepspeed_line(std::string_view text, int line, TrainingLog& log) {
  if (text.find("RunningAvgSamplesPerSec=") == std::string_view::npos) return;
  const auto step = number_after(text, "global_step=", log.source, line);
  const auto current = number_after(text, "CurrSamplesPerSec=", log.source, line);
  if (!step || !current || *current <= 0)
    fail_line(log.source, line,
              "expected 'global_step=N' and a positive 'CurrSamplesPerSec=' (DeepSpeed throughput line)");
  LogStep s;
  s.iteration = std::llround(*step);
  s.line = line;
  s.samples_per_s = current;
  if (const auto max_gib = number_after(text, "MaxMemAllocated=", log.source, line))
    s.peak_bytes = *max_gib * 1024.0 * 1024.0 * 1024.0;
  log.steps.push_back(s);
}

}  // namespace shardplan::interop::log_detail
