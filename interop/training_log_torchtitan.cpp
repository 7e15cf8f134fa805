// torchtitan logs (torchtitan/components/metrics.py, MetricsProcessor.log; checked at
// pytorch/torchtitan c13b9d66, 2026, and v0.2.2). Rank 0 prints at step 1 and every
// --metrics.log_freq steps, through the "[titan] ... - root - INFO - " logger, with ANSI colours
// unless --metrics.disable_color_printing:
//   "step: 10  loss:  9.87312  grad_norm:  2.9054  memory: 49.66GiB(62.70%)  tps: 6,841
//    tflops: 396.21  mfu: 40.06%"
// tps is tokens per second per device (the interval's tokens / (time x tp x pp x cp)), memory
// the device's max *reserved* GiB. Older logs have no grad_norm; "validate step:" lines are
// evaluation, not training.
#include <algorithm>
#include <cmath>
#include <string>

#include "training_log.hpp"

namespace shardplan::interop::log_detail {

namespace {

// The line without ANSI escape sequences (ESC '[' ... final letter) and thousands separators.
std::string plain(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    if (text[i] == ',' && i > 0 && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[i + 1])))
      continue;
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace

void torchtitan_line(std::string_view raw, int line, TrainingLog& log) {
  if (raw.find("tps:") == std::string_view::npos || raw.find("step:") == std::string_view::npos) return;
  const std::string text = plain(raw);
  const std::size_t at = text.find("step:");
  if (at == std::string::npos) return;
  if (at >= 9 && text.compare(at - 9, 9, "validate ") == 0) return;
  const auto step = number_after(text, "step:", log.source, line);
  const auto tps = number_after(text, "tps:", log.source, line);
  if (!step || !tps || *tps <= 0)
    fail_line(log.source, line, "expected 'step: N' and a positive 'tps:' (torchtitan metrics line)");
  LogStep s;
  s.iteration = std::llround(*step);
  s.line = line;
  s.tokens_per_s_per_device = tps;
  if (const auto tflops = number_after(text, "tflops:", log.source, line)) s.flops_per_s_per_device = *tflops * 1e12;
  if (const auto gib = number_after(text, "memory:", log.source, line)) s.peak_bytes = *gib * 1024.0 * 1024.0 * 1024.0;
  s.loss = number_after(text, "loss:", log.source, line);
  log.steps.push_back(s);
}

}  // namespace shardplan::interop::log_detail
