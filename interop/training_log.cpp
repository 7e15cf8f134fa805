// Training logs: the format names, the line loop, the helpers the per-format readers share, and
// the steady-state figure of a log.
#include "training_log.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <sstream>

#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;

namespace {

struct FormatName {
  LogFormat format;
  const char* name;
  void (*reader)(std::string_view, int, TrainingLog&);
};

constexpr std::array<FormatName, 6> kFormats{{
    {LogFormat::megatron, "megatron", log_detail::megatron_line},
    {LogFormat::torchtitan, "torchtitan", log_detail::torchtitan_line},
    {LogFormat::deepspeed, "deepspeed", log_detail::deepspeed_line},
    {LogFormat::hf_trainer, "hf-trainer", log_detail::hf_trainer_line},
    {LogFormat::optimum_habana, "optimum-habana", log_detail::optimum_habana_line},
    {LogFormat::shardrun, "shardrun", log_detail::shardrun_line},
}};

const FormatName& entry(LogFormat f) {
  for (const auto& e : kFormats)
    if (e.format == f) return e;
  SHARDPLAN_CHECK(false, "unknown log format");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::string to_string(LogFormat f) { return entry(f).name; }

std::optional<LogFormat> log_format_from_string(std::string_view s) {
  for (const auto& e : kFormats)
    if (s == e.name) return e.format;
  return std::nullopt;
}

std::vector<std::string> log_format_names() {
  std::vector<std::string> out;
  for (const auto& e : kFormats) out.emplace_back(e.name);
  return out;
}

namespace log_detail {

void fail_line(const std::string& source, int line, const std::string& what) {
  throw sim::InputError(source + ":" + std::to_string(line) + ": " + what);
}

std::optional<double> leading_number(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  const std::string text(s.substr(i, 64));
  if (text.empty()) return std::nullopt;
  const char c = text[0];
  if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.')) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<double> number_after(std::string_view text, std::string_view key, const std::string& source, int line) {
  const std::size_t at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const auto v = leading_number(text.substr(at + key.size()));
  if (!v) fail_line(source, line, "expected a number after '" + std::string(key) + "'");
  return v;
}

}  // namespace log_detail

TrainingLog parse_training_log(std::istream& in, LogFormat format, const std::string& source) {
  TrainingLog log;
  log.source = source;
  log.format = format;
  const auto reader = entry(format).reader;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    reader(text, line, log);
  }
  for (const auto& s : log.steps)
    if (s.peak_bytes) log.peak_bytes = std::max(log.peak_bytes.value_or(0.0), *s.peak_bytes);
  if (log.summary && log.summary->peak_bytes)
    log.peak_bytes = std::max(log.peak_bytes.value_or(0.0), *log.summary->peak_bytes);
  if (log.steps.empty() && !log.summary)
    throw sim::InputError(source + ": no " + to_string(format) + " training-log line found (is --format right?)");
  return log;
}

TrainingLog load_training_log(const std::string& path, LogFormat format) {
  std::ifstream in(path);
  if (!in) throw sim::InputError(path + ": cannot open the training log");
  return parse_training_log(in, format, path);
}

MeasuredFigure measured_figure(const TrainingLog& log, std::optional<int> skip_steps) {
  if (skip_steps && *skip_steps < 0) throw sim::InputError("--skip-steps: expected a count >= 0");
  const std::size_t n = log.steps.size();
  const std::size_t skip = skip_steps ? static_cast<std::size_t>(*skip_steps) : (n > 2 ? 1 : 0);
  MeasuredFigure m;
  m.peak_bytes = log.peak_bytes;
  struct Figure {
    const char* key;
    std::optional<double> LogStep::*field;
  };
  for (const Figure f : {Figure{"step_seconds", &LogStep::step_s}, Figure{"tokens_per_second", &LogStep::tokens_per_s},
                         Figure{"tokens_per_second_per_device", &LogStep::tokens_per_s_per_device},
                         Figure{"samples_per_second", &LogStep::samples_per_s}}) {
    std::vector<double> values;
    int first = 0, last = 0;
    for (std::size_t i = skip; i < n; ++i) {
      const auto& v = log.steps[i].*(f.field);
      if (!v) continue;
      values.push_back(*v);
      if (first == 0) first = log.steps[i].line;
      last = log.steps[i].line;
    }
    if (values.empty()) continue;
    m.key = f.key;
    m.value = median(values);
    m.steps_used = static_cast<int>(values.size());
    std::ostringstream how;
    how << "median " << f.key << " of " << values.size() << " logged iteration(s), lines " << first << "-" << last
        << ", after skipping the first " << skip << " as warm-up";
    m.how = how.str();
    return m;
  }
  if (log.summary) {
    const LogSummary& s = *log.summary;
    if (s.samples_per_s) {
      m.key = "samples_per_second";
      m.value = *s.samples_per_s;
    } else if (s.steps_per_s && *s.steps_per_s > 0) {
      m.key = "step_seconds";
      m.value = 1.0 / *s.steps_per_s;
    }
    if (!m.key.empty()) {
      m.how = "the run's summary line " + std::to_string(s.line) + " (whole run, warm-up included)";
      return m;
    }
  }
  throw sim::InputError(log.source + ": no timing figure left after skipping " + std::to_string(skip) +
                        " warm-up iteration(s) (" + std::to_string(n) + " logged)");
}

}  // namespace shardplan::interop
