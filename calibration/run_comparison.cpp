// Recorded runs against the simulator (see run_comparison.hpp).
#include "run_comparison.hpp"

#include <algorithm>
#include <sstream>

#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/prediction_json.hpp"
#include "svg_panel.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
using nlohmann::json;

RunComparison compare_run(const RecordedRun& run, const sim::HardwareProfile& hw) {
  RunComparison c;
  c.framework = run.framework_name();
  c.name = run.name;
  c.source = run.source;
  const sim::ClusterSpec cluster{hw, run.plan.cluster.nodes, run.plan.cluster.devices_per_node};
  sim::ParallelConfig cfg = run.plan.config;
  cfg.memory_headroom = 0;  // it ran: the whole device was there to use
  const sim::Prediction p = sim::simulate(run.plan.model, cluster, cfg);
  c.devices = p.devices;
  c.measured_step_s = run.measured_step_s;
  c.predicted_step_s = p.time.step_s;
  c.measured_tokens_per_s = run.tokens_per_step() / run.measured_step_s;
  c.predicted_tokens_per_s = p.tokens_per_s;
  c.predicted_mfu = p.mfu;
  c.fits = p.feasible;
  c.infeasible_reason = p.infeasible_reason;
  // Like with like: the figure the run's measurement is (its framework's log line, or as given).
  c.peak_kind = run.measured_peak_kind;
  c.predicted_peak_bytes = p.worst.total();
  c.predicted_reported_peak_bytes = p.worst.reported(run.measured_peak_kind);
  c.capacity_bytes = p.device_capacity_bytes;
  c.measured_peak_bytes = run.measured_peak_bytes.value_or(0.0);
  c.predicted_time = p.time;
  return c;
}

std::vector<RunComparison> compare_runs(const std::vector<RecordedRun>& runs) {
  std::vector<RunComparison> out;
  out.reserve(runs.size());
  for (const auto& r : runs) out.push_back(compare_run(r, r.plan.cluster.hardware));
  return out;
}

namespace {

template <class Pred>
void fill(const std::vector<RunComparison>& rows, Pred keep, ValidationErrorStats& stats, double& bias,
          int& not_fitting) {
  std::vector<std::pair<double, std::string>> errors;
  double sum = 0;
  for (const auto& r : rows) {
    if (!keep(r)) continue;
    errors.emplace_back(r.throughput_error(), r.name);
    sum += r.throughput_error();
    if (!r.fits) ++not_fitting;
  }
  stats = abs_error_stats(errors);
  bias = errors.empty() ? 0.0 : sum / static_cast<double>(errors.size());
}

json stats_json(const ValidationErrorStats& s, double bias) {
  return {{"runs", s.count},          {"mean_abs", s.mean_abs},   {"median_abs", s.median_abs},
          {"worst_abs", s.worst_abs}, {"worst_run", s.worst_run}, {"bias", bias}};
}

}  // namespace

namespace {

// One row per distinct key(run), in file order.
template <class Key>
std::vector<SourceStats> grouped(const std::vector<RunComparison>& rows, Key key) {
  std::vector<SourceStats> out;
  for (const auto& r : rows) {
    if (std::any_of(out.begin(), out.end(), [&](const SourceStats& ps) { return ps.source == key(r); })) continue;
    SourceStats ps;
    ps.source = key(r);
    fill(
        rows, [&](const RunComparison& x) { return key(x) == key(r); }, ps.throughput, ps.bias, ps.not_fitting);
    out.push_back(ps);
  }
  return out;
}

// One object per group: its statistics, named under `key`.
json groups_json(const std::vector<SourceStats>& groups, const char* key) {
  json out = json::array();
  for (const auto& g : groups) {
    json j = stats_json(g.throughput, g.bias);
    j[key] = g.source;
    j["predicted_not_to_fit"] = g.not_fitting;
    out.push_back(j);
  }
  return out;
}

}  // namespace

ComparisonSummary summarize(const std::vector<RunComparison>& rows) {
  ComparisonSummary s;
  fill(
      rows, [](const RunComparison&) { return true; }, s.throughput, s.bias, s.not_fitting);
  s.per_source = grouped(rows, [](const RunComparison& r) { return r.source; });
  s.per_framework = grouped(rows, [](const RunComparison& r) { return r.framework; });
  return s;
}

json to_json(const std::vector<RunComparison>& rows, const ComparisonSummary& s, const std::string& runs_file) {
  json runs = json::array();
  for (const auto& r : rows)
    runs.push_back(
        {{"name", r.name},
         {"source", r.source},
         {"framework", r.framework},
         {"devices", r.devices},
         {"measured",
          {{"step_seconds", r.measured_step_s},
           {"tokens_per_second", r.measured_tokens_per_s},
           {"peak_memory_bytes", r.measured_peak_bytes}}},
         {"predicted",
          {{"step_seconds", r.predicted_step_s},
           {"tokens_per_second", r.predicted_tokens_per_s},
           {"mfu", r.predicted_mfu},
           {"fits_at_headroom_0", r.fits},
           {"infeasible_reason", r.infeasible_reason},
           {"peak_memory_bytes", r.predicted_peak_bytes},
           {"peak_memory_reported", {{"kind", sim::name_of(r.peak_kind)}, {"bytes", r.predicted_reported_peak_bytes}}},
           {"capacity_bytes", r.capacity_bytes},
           {"time", sim::to_json(r.predicted_time)}}},
         {"throughput_error", r.throughput_error()}});
  json summary = stats_json(s.throughput, s.bias);
  summary["predicted_not_to_fit"] = s.not_fitting;
  summary["per_source"] = groups_json(s.per_source, "source");
  summary["per_framework"] = groups_json(s.per_framework, "framework");
  return {{"schema", "shardplan.runs-validation/1"}, {"runs_file", runs_file}, {"runs", runs}, {"summary", summary}};
}

void write_runs_svg(const std::vector<RunComparison>& rows, const std::string& title, const std::string& path) {
  using namespace svg;  // NOLINT: the panel helpers
  std::vector<Point> pts;
  for (std::size_t i = 0; i < rows.size(); ++i)
    pts.push_back({static_cast<int>(i) + 1, rows[i].predicted_tokens_per_s / rows[i].devices,
                   rows[i].measured_tokens_per_s / rows[i].devices, !rows[i].fits});
  const double width = kLeft + kPanelW + 420, legend_top = kTop;
  const double height = std::max(kTop + kPanelH + 90, legend_top + 15 * (static_cast<double>(rows.size()) + 2));
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width)
    << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height)
    << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << num(kLeft) << "\" y=\"20\" font-size=\"13\">" << esc(title)
    << "; shaded: within 10 % of y = x; hollow: predicted not to fit</text>\n";
  const Panel panel(kLeft, pts);
  panel.frame(o, "clip-tps", "tokens/s per device", "tokens/s");
  panel.points(o, pts);
  const double lx = kLeft + kPanelW + 30;
  for (std::size_t i = 0; i < rows.size(); ++i)
    o << "<text x=\"" << num(lx) << "\" y=\"" << num(legend_top + 15 * static_cast<double>(i)) << "\" font-size=\"10\">"
      << (i + 1) << "  " << esc(rows[i].name) << ": " << percent(rows[i].throughput_error()) << "</text>\n";
  o << "</svg>\n";
  sim::write_file_atomically(path, o.str());
}

}  // namespace shardplan::calibration
