#pragma once
// Predicted vs measured for recorded runs (`shardplan validate --runs FILE`, `--suite published`):
// each run simulated on its own cluster, throughput compared, memory feasibility at headroom 0
// (a run that really ran must be predicted to fit), statistics overall and per source.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runs_file.hpp"
#include "simulator/prediction.hpp"
#include "validation.hpp"

namespace shardplan::calibration {

struct RunComparison {
  std::string name, source;
  std::string framework;  // the framework the run names, or "unnamed"
  int devices = 0;
  double measured_step_s = 0, predicted_step_s = 0;
  double measured_tokens_per_s = 0, predicted_tokens_per_s = 0;
  double predicted_mfu = 0;
  bool fits = false;  // predicted to fit at headroom 0
  std::string infeasible_reason;
  double predicted_peak_bytes = 0;  // worst stage, per device: what must fit (tensors + runtime)
  // The predicted figure of the kind the measurement is (the framework's log line, or as given).
  double predicted_reported_peak_bytes = 0;
  simulator::MemoryReport peak_kind = simulator::MemoryReport::device;
  double capacity_bytes = 0;                // per device
  double measured_peak_bytes = 0;           // 0 = not published
  simulator::TimeBreakdown predicted_time;  // where the predicted step goes (the JSON's "time")
  // Throughput: (predicted - measured) / measured tokens/s (= measured / predicted step time - 1).
  [[nodiscard]] double throughput_error() const { return predicted_tokens_per_s / measured_tokens_per_s - 1; }
};

// Simulates a run on `hw` with its own nodes and layout; compare_runs uses each run's own profile.
RunComparison compare_run(const RecordedRun& run, const simulator::HardwareProfile& hw);
std::vector<RunComparison> compare_runs(const std::vector<RecordedRun>& runs);

struct SourceStats {
  std::string source;
  ValidationErrorStats throughput;
  double bias = 0;      // mean signed throughput error
  int not_fitting = 0;  // runs that ran but are predicted not to fit
};
struct ComparisonSummary {
  ValidationErrorStats throughput;
  double bias = 0;
  int not_fitting = 0;
  std::vector<SourceStats> per_source;     // in file order
  std::vector<SourceStats> per_framework;  // the same by framework name ("source" holds it)
};
ComparisonSummary summarize(const std::vector<RunComparison>& rows);

// {"schema": "shardplan.runs-validation/1", "runs_file", "runs": [...], "summary": {...}}
nlohmann::json to_json(const std::vector<RunComparison>& rows, const ComparisonSummary& s,
                       const std::string& runs_file);
// Log-log scatter of predicted vs measured tokens/s per device, one numbered point per run.
void write_runs_svg(const std::vector<RunComparison>& rows, const std::string& title, const std::string& path);

}  // namespace shardplan::calibration
