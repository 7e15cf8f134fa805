// SVG of a validation: two log-log scatter panels (step time, peak memory per rank), predicted
// on x, measured on y, the y = x line and a +-10 % band; every ran run is one numbered circle
// in each panel (hollow in the time panel when its time was not judged), named in a legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "simulator/json_fields.hpp"
#include "svg_panel.hpp"
#include "validation.hpp"

namespace shardplan::calibration {

using namespace svg;  // NOLINT: the panel helpers

std::string svg_plot(const ValidationReport& r) {
  std::vector<Point> time, mem;
  std::vector<const ValidationRun*> ran;
  for (const auto& run : r.runs)
    if (run.status == RunStatus::ran && run.has_measurement) ran.push_back(&run);
  for (std::size_t i = 0; i < ran.size(); ++i) {
    const ValidationRun& run = *ran[i];
    const int k = static_cast<int>(i) + 1;
    time.push_back({k, run.predicted_step_s, run.measured_step_s, !run.time_judged});
    const std::size_t rank = static_cast<std::size_t>(run.memory_error_rank);
    const double meas =
        rank < run.measured_peak_per_rank.size() ? run.measured_peak_per_rank[rank] : run.measured_peak_bytes;
    const double pred =
        rank < run.predicted_peak_per_rank.size() ? run.predicted_peak_per_rank[rank] : run.predicted_peak_bytes;
    mem.push_back({k, pred / 1048576.0, meas / 1048576.0, false});
  }
  const double width = kLeft + 2 * kPanelW + kGap + 40;
  const double legend_top = kTop + kPanelH + 75;
  const double height = legend_top + 20 * (static_cast<double>(ran.size()) + 3);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\"" << num(height)
    << "\" viewBox=\"0 0 " << num(width) << " " << num(height) << "\" font-family=\"sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << num(kLeft) << "\" y=\"20\" font-size=\"13\">shardplan validate: " << esc(r.hardware) << ", "
    << r.steps << " steps, " << r.threads_per_rank << " thread(s) per rank, " << r.cores
    << " cores; shaded: within 10 % of y = x</text>\n";
  const Panel tp(kLeft, time), mp(kLeft + kPanelW + kGap, mem);
  tp.frame(o, "clip-time", "step time", "s");
  mp.frame(o, "clip-memory", "peak memory per rank (worst rank)", "MiB");
  tp.points(o, time);
  mp.points(o, mem);
  double y = legend_top;
  for (std::size_t i = 0; i < ran.size(); ++i, y += 20) {
    const ValidationRun& run = *ran[i];
    o << "<text x=\"" << num(kLeft) << "\" y=\"" << num(y) << "\" font-size=\"12\">" << (i + 1) << "  "
      << esc(run.entry.name) << " (" << run.ranks << (run.ranks == 1 ? " rank" : " ranks") << "): step time "
      << percent(run.step_error) << (run.time_judged ? "" : " [" + esc(run.time_note) + ", not judged]")
      << ", peak memory " << percent(run.memory_error) << "</text>\n";
  }
  o << "<text x=\"" << num(kLeft) << "\" y=\"" << num(y + 10)
    << "\" font-size=\"11\" fill=\"#555\">hollow: step time not judged (more ranks x threads than cores); "
       "error = (predicted - measured) / measured</text>\n";
  o << "</svg>\n";
  return o.str();
}

void write_svg_plot(const ValidationReport& r, const std::string& path) {
  simulator::write_file_atomically(path, svg_plot(r));
}

}  // namespace shardplan::calibration
