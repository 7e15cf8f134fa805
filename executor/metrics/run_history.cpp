#include "run_history.hpp"

#include <algorithm>
#include <fstream>

namespace shardplan::executor {

MetricsLines read_metrics(const std::string& path) {
  MetricsLines m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) {
      ++m.unreadable;
      continue;
    }
    m.lines.push_back(std::move(j));
  }
  return m;
}

namespace {

int attempt_of(const nlohmann::json& line) { return line.value("attempt", 1); }

}  // namespace

int next_attempt(const MetricsLines& m) {
  int last = 0;
  for (const auto& l : m.lines) last = std::max(last, attempt_of(l));
  return last + 1;
}

std::vector<AttemptSummary> attempts_of(const MetricsLines& m) {
  std::vector<AttemptSummary> out;
  for (const auto& l : m.lines) {
    const int a = attempt_of(l);
    const int64_t step = l.value("step", int64_t{0});
    const double t = l.value("unix_time_s", 0.0);
    if (out.empty() || out.back().attempt != a) {
      AttemptSummary s;
      s.attempt = a;
      s.first_step = step;
      s.started_unix_s = t > 0 ? t - l.value("step_seconds", 0.0) : 0.0;
      out.push_back(s);
    }
    AttemptSummary& s = out.back();
    s.last_step = step;
    s.ended_unix_s = t;
    ++s.steps;
  }
  return out;
}

nlohmann::json summarize_attempts(const MetricsLines& m) {
  const std::vector<AttemptSummary> as = attempts_of(m);
  nlohmann::json per = nlohmann::json::array();
  int64_t run = 0, lost = 0;
  double gap = 0;
  for (std::size_t i = 0; i < as.size(); ++i) {
    const AttemptSummary& a = as[i];
    nlohmann::json j = {
        {"attempt", a.attempt}, {"first_step", a.first_step}, {"last_step", a.last_step}, {"steps", a.steps}};
    run += a.steps;
    if (i > 0) {
      const AttemptSummary& prev = as[i - 1];
      const int64_t again = std::max<int64_t>(0, prev.last_step - a.first_step + 1);
      const bool timed = prev.ended_unix_s > 0 && a.started_unix_s > 0;
      j["steps_lost"] = again;
      j["restart_gap_seconds"] = timed ? nlohmann::json(a.started_unix_s - prev.ended_unix_s) : nlohmann::json(nullptr);
      lost += again;
      if (timed) gap += a.started_unix_s - prev.ended_unix_s;
    }
    per.push_back(std::move(j));
  }
  return {{"count", as.size()},
          {"steps_run", run},
          {"steps_lost", lost},
          {"restart_gap_seconds", gap},
          {"unreadable_lines", m.unreadable},
          {"per_attempt", per}};
}

}  // namespace shardplan::executor
