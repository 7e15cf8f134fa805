// Hugging Face Trainer logs, and Optimum-Habana's GaudiTrainer (the same lines plus HPU memory).
//
// The Trainer prints each log dict with str(dict) (transformers ProgressCallback/PrinterCallback):
// per logging step {'loss': 1.23, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.02} (no
// timing), and at the end speed_metrics("train", ...) (transformers trainer_utils.py):
// {'train_runtime': 123.4, 'train_samples_per_second': 9.87, 'train_steps_per_second': 0.12,
// 'train_loss': 1.2, 'epoch': 2.0}. Newer versions format the floats as quoted strings ('1.234');
// both forms are read. Example scripts also print trainer.log_metrics("train", metrics)
// (trainer_pt_utils.py): "***** train metrics *****" then "  train_samples_per_second = 9.876".
//
// Optimum-Habana (optimum/habana/transformers/trainer.py, GaudiTrainer.log; utils/misc.py
// get_hpu_memory_stats) adds 'memory_allocated (GB)', 'max_memory_allocated (GB)' and
// 'total_memory_available (GB)' (GiB: bytes / 1024**3, rounded to 0.01) to every dict, and its
// speed metrics leave out the first --throughput_warmup_steps steps.
#include <cmath>

#include "training_log.hpp"

namespace shardplan::interop::log_detail {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The value of 'key' in a printed dict ('key': 1.5 or 'key': '1.5'), or of "  key = 1.5" in a
// log_metrics block.
std::optional<double> metric(std::string_view text, std::string_view key, const std::string& source, int line) {
  const std::string quoted = "'" + std::string(key) + "':";
  std::size_t at = text.find(quoted);
  std::size_t after = at + quoted.size();
  if (at == std::string_view::npos) {
    const auto first = text.find_first_not_of(' ');
    if (first == std::string_view::npos || text.substr(first, key.size()) != key) return std::nullopt;
    after = first + key.size();
    while (after < text.size() && text[after] == ' ') ++after;
    if (after >= text.size() || text[after] != '=') return std::nullopt;
    ++after;
  }
  while (after < text.size() && (text[after] == ' ' || text[after] == '\'')) ++after;
  const auto v = leading_number(text.substr(after));
  if (!v) fail_line(source, line, "expected a number for '" + std::string(key) + "'");
  return v;
}

void trainer_line(std::string_view text, int line, TrainingLog& log, bool habana) {
  const auto samples = metric(text, "train_samples_per_second", log.source, line);
  const auto steps = metric(text, "train_steps_per_second", log.source, line);
  const auto runtime = text.find("'train_runtime':") != std::string_view::npos
                           ? metric(text, "train_runtime", log.source, line)
                           : std::nullopt;  // log_metrics prints it as H:MM:SS.cc
  const auto peak_gib = habana ? metric(text, "max_memory_allocated (GB)", log.source, line) : std::nullopt;
  if (samples || steps || runtime) {
    if (samples && *samples <= 0) fail_line(log.source, line, "expected a positive 'train_samples_per_second'");
    if (!log.summary) log.summary = LogSummary{};
    LogSummary& s = *log.summary;
    s.line = line;
    if (samples) s.samples_per_s = samples;
    if (steps) s.steps_per_s = steps;
    if (runtime) s.runtime_s = runtime;
  }
  if (peak_gib) {
    const double bytes = *peak_gib * kGiB;
    if (!log.summary) log.summary = LogSummary{};
    log.summary->peak_bytes = std::max(log.summary->peak_bytes.value_or(0.0), bytes);
  }
}

}  // namespace

void hf_trainer_line(std::string_view text, int line, TrainingLog& log) { trainer_line(text, line, log, false); }

void optimum_habana_line(std::string_view text, int line, TrainingLog& log) { trainer_line(text, line, log, true); }

}  // namespace shardplan::interop::log_detail
