#pragma once
// A run's history across restarts. Every attempt of a run (the first launch and each resume by
// shardrun-launch, Slurm or a user's `--resume auto`) appends its steps to the same
// metrics.jsonl, each line tagged with the attempt's number and the wall-clock time it was
// written; earlier attempts' lines are never rewritten. report.json summarises the attempts: the
// steps each ran, the steps lost to each restart (run again after resuming from an older
// checkpoint) and the time from the failed attempt's last step to the next attempt's first.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shardplan::executor {

// The lines of a metrics.jsonl. A line cut short by a kill mid-write (the last one, unparsable) is
// skipped and counted in `unreadable`; a missing file has no lines.
struct MetricsLines {
  std::vector<nlohmann::json> lines;
  int unreadable = 0;
};
MetricsLines read_metrics(const std::string& path);

// The attempt number of the next writer: one more than the largest in `lines` (lines written
// before attempts were recorded count as attempt 1); 1 when there are none.
int next_attempt(const MetricsLines& m);

struct AttemptSummary {
  int attempt = 0;
  int64_t first_step = 0, last_step = 0, steps = 0;
  double started_unix_s = 0;  // the first step's write time minus its duration
  double ended_unix_s = 0;    // the last step's write time
};
std::vector<AttemptSummary> attempts_of(const MetricsLines& m);

// {"count", "steps_run", "steps_lost", "restart_gap_seconds", "per_attempt": [...]}: per attempt
// its steps and, for each after the first, `steps_lost` (steps of the previous attempt at or past
// this one's first step, run twice) and `restart_gap_seconds` (previous attempt's last step to
// this one's first step starting: failure detection, health check, relaunch, restore).
nlohmann::json summarize_attempts(const MetricsLines& m);

}  // namespace shardplan::executor
