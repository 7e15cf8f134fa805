// `shardplan validate --runs FILE`: see validate_runs.hpp.
#include "validate_runs.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "calibration/calibration.hpp"
#include "calibration/run_comparison.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::cli {

namespace cal = shardplan::calibration;
namespace sim = shardplan::simulator;

namespace {

// The runs `only` names, as calibrate selects them (calibration::select_runs: run name, source,
// profile, or a name prefix ending in '*').
std::vector<cal::RecordedRun> select(std::vector<cal::RecordedRun> runs, const std::string& only) {
  if (only.empty()) return runs;
  std::vector<cal::MeasuredRun> kept = cal::measured_from_recorded(runs);
  cal::select_runs(kept, planner::split_list(only));
  std::erase_if(runs, [&](const cal::RecordedRun& r) {
    return std::none_of(kept.begin(), kept.end(), [&](const cal::MeasuredRun& k) { return k.name == r.name; });
  });
  return runs;
}

void print_rows(const std::vector<cal::RunComparison>& rows) {
  std::printf("\n%-46s %-17s %6s %12s %12s %8s %6s %s\n", "run", "source", "devices", "measured", "predicted", "error",
              "MFU", "memory (predicted / capacity)");
  std::printf("%-46s %-17s %6s %12s %12s %8s %6s\n", "", "", "", "tokens/s", "tokens/s", "", "");
  for (const auto& r : rows) {
    std::printf("%-46s %-17s %6d %12.0f %12.0f %+7.1f%% %5.1f%% %s / %s%s\n", r.name.c_str(), r.source.c_str(),
                r.devices, r.measured_tokens_per_s, r.predicted_tokens_per_s, 100 * r.throughput_error(),
                100 * r.predicted_mfu, sim::format_bytes(r.predicted_peak_bytes).c_str(),
                sim::format_bytes(r.capacity_bytes).c_str(), r.fits ? "" : "  PREDICTED NOT TO FIT");
    if (r.measured_peak_bytes > 0)
      std::printf("%-46s peak memory (%s): measured %s, predicted %s, %+.1f%%\n", "", sim::name_of(r.peak_kind),
                  sim::format_bytes(r.measured_peak_bytes).c_str(),
                  sim::format_bytes(r.predicted_reported_peak_bytes).c_str(),
                  100 * (r.predicted_reported_peak_bytes / r.measured_peak_bytes - 1));
  }
}

void print_summary(const cal::ComparisonSummary& s) {
  std::printf("\n%-18s %5s %9s %9s %9s %9s %s\n", "source", "runs", "mean|err|", "median", "worst", "bias",
              "predicted not to fit");
  auto row = [](const std::string& name, const cal::ValidationErrorStats& t, double bias, int nf) {
    std::printf("%-18s %5d %8.1f%% %8.1f%% %8.1f%% %+8.1f%% %d\n", name.c_str(), t.count, 100 * t.mean_abs,
                100 * t.median_abs, 100 * t.worst_abs, 100 * bias, nf);
  };
  for (const auto& ps : s.per_source) row(ps.source, ps.throughput, ps.bias, ps.not_fitting);
  row("all", s.throughput, s.bias, s.not_fitting);
  std::printf("\n%-18s %5s %9s %9s %9s %9s %s\n", "framework", "runs", "mean|err|", "median", "worst", "bias",
              "predicted not to fit");
  for (const auto& pf : s.per_framework) row(pf.source, pf.throughput, pf.bias, pf.not_fitting);
  std::printf("throughput error = (predicted - measured) / measured tokens/s; worst run: %s\n",
              s.throughput.worst_run.c_str());
}

}  // namespace

int run_validate_recorded(const RecordedValidateOptions& o) {
  const cal::RunsFile file = cal::load_runs_file(o.runs_file);
  const auto runs = select(file.runs, o.only);
  std::fprintf(stderr, "simulating %zu recorded run%s from %s\n", runs.size(), runs.size() == 1 ? "" : "s",
               o.runs_file.c_str());
  const auto rows = cal::compare_runs(runs);
  const auto summary = cal::summarize(rows);
  print_rows(rows);
  print_summary(summary);
  if (!o.json.empty()) {
    sim::write_file_atomically(o.json, cal::to_json(rows, summary, o.runs_file).dump(2) + "\n");
    std::printf("json: %s\n", o.json.c_str());
  }
  if (!o.plot.empty()) {
    cal::write_runs_svg(rows, "shardplan validate --runs " + std::filesystem::path(o.runs_file).filename().string(),
                        o.plot);
    std::printf("plot: %s\n", o.plot.c_str());
  }
  return 0;
}

}  // namespace shardplan::cli
