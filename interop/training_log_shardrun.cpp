// shardrun's metrics.jsonl: one JSON object per step (executor/metrics/run_report.cpp,
// StepRecord::to_json): "step", "step_seconds", "tokens_per_second", "peak_memory_bytes", "loss".
#include <nlohmann/json.hpp>

#include "training_log.hpp"

namespace shardplan::interop::log_detail {

namespace {

std::optional<double> number(const nlohmann::json& j, const char* key, const std::string& source, int line) {
  if (!j.contains(key)) return std::nullopt;
  const auto& v = j[key];
  if (!v.is_number()) fail_line(source, line, std::string("'") + key + "': expected a number");
  return v.get<double>();
}

}  // namespace

void shardrun_line(std::string_view text, int line, TrainingLog& log) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos || text[first] != '{') return;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    fail_line(log.source, line, "expected one JSON object per line (shardrun metrics.jsonl)");
  const auto step = number(j, "step", log.source, line);
  const auto step_s = number(j, "step_seconds", log.source, line);
  if (!step || !step_s || *step_s <= 0)
    fail_line(log.source, line, "expected \"step\" and a positive \"step_seconds\" (shardrun metrics.jsonl)");
  LogStep s;
  s.iteration = static_cast<long long>(*step);
  s.line = line;
  s.step_s = step_s;
  s.tokens_per_s = number(j, "tokens_per_second", log.source, line);
  s.peak_bytes = number(j, "peak_memory_bytes", log.source, line);
  s.loss = number(j, "loss", log.source, line);
  log.steps.push_back(s);
}

}  // namespace shardplan::interop::log_detail
