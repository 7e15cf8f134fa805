// SVG of a validation: two log-log scatter panels (step time, peak memory per rank), predicted
// on x, measured on y, the y = x line and a +-10 % band; every ran run is one numbered circle
// in each panel (hollow in the time panel when its time was not judged), named in a legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "simulator/json_fields.hpp"
#include "validation.hpp"

namespace shardplan::planner {

namespace {

constexpr double kPanelW = 430, kPanelH = 380;  // plot area of one panel
constexpr double kLeft = 80, kTop = 60, kGap = 120;
constexpr double kBand = 0.10;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

struct Point {
  int index = 0;  // 1-based legend number
  double predicted = 0, measured = 0;
  bool hollow = false;
};

// A square log-log panel at x offset `x0`; values in display units.
class Panel {
 public:
  Panel(double x0, const std::vector<Point>& pts) : x0_(x0) {
    double lo = 0, hi = 0;
    for (const auto& p : pts)
      for (double v : {p.predicted, p.measured}) {
        if (!(v > 0)) continue;
        lo = lo > 0 ? std::min(lo, v) : v;
        hi = std::max(hi, v);
      }
    if (!(lo > 0)) lo = hi = 1;
    lo_ = std::log10(lo / 1.3);
    hi_ = std::log10(hi * 1.3);
  }
  [[nodiscard]] double x(double v) const { return x0_ + (std::log10(v) - lo_) / (hi_ - lo_) * kPanelW; }
  [[nodiscard]] double y(double v) const { return kTop + kPanelH - (std::log10(v) - lo_) / (hi_ - lo_) * kPanelH; }
  [[nodiscard]] double lo() const { return std::pow(10.0, lo_); }
  [[nodiscard]] double hi() const { return std::pow(10.0, hi_); }

  void frame(std::ostream& o, const std::string& id, const std::string& title, const std::string& unit) const {
    o << "<clipPath id=\"" << id << "\"><rect x=\"" << num(x0_) << "\" y=\"" << num(kTop) << "\" width=\""
      << num(kPanelW) << "\" height=\"" << num(kPanelH) << "\"/></clipPath>\n";
    o << "<text x=\"" << num(x0_ + kPanelW / 2) << "\" y=\"" << num(kTop - 20)
      << "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" << esc(title) << "</text>\n";
    ticks(o);
    o << "<rect x=\"" << num(x0_) << "\" y=\"" << num(kTop) << "\" width=\"" << num(kPanelW) << "\" height=\""
      << num(kPanelH) << "\" fill=\"none\" stroke=\"#333\"/>\n";
    o << "<text x=\"" << num(x0_ + kPanelW / 2) << "\" y=\"" << num(kTop + kPanelH + 40)
      << "\" text-anchor=\"middle\" font-size=\"13\">predicted (" << esc(unit) << ")</text>\n";
    const double cy = kTop + kPanelH / 2, cx = x0_ - 55;
    o << "<text x=\"" << num(cx) << "\" y=\"" << num(cy) << "\" text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 "
      << num(cx) << " " << num(cy) << ")\">measured (" << esc(unit) << ")</text>\n";
    const double a = lo(), b = hi();
    o << "<g clip-path=\"url(#" << id << ")\">\n";
    o << "<polygon fill=\"#2a9d8f\" fill-opacity=\"0.15\" stroke=\"none\" points=\"" << num(x(a)) << ","
      << num(y(a * (1 - kBand))) << " " << num(x(b)) << "," << num(y(b * (1 - kBand))) << " " << num(x(b)) << ","
      << num(y(b * (1 + kBand))) << " " << num(x(a)) << "," << num(y(a * (1 + kBand))) << "\"/>\n";
    o << "<line x1=\"" << num(x(a)) << "\" y1=\"" << num(y(a)) << "\" x2=\"" << num(x(b)) << "\" y2=\"" << num(y(b))
      << "\" stroke=\"#2a9d8f\" stroke-width=\"1.5\"/>\n</g>\n";
  }

  void points(std::ostream& o, const std::vector<Point>& pts) const {
    for (const auto& p : pts) {
      if (!(p.predicted > 0) || !(p.measured > 0)) continue;
      const double px = x(p.predicted), py = y(p.measured);
      o << "<circle cx=\"" << num(px) << "\" cy=\"" << num(py) << "\" r=\"5\" fill=\""
        << (p.hollow ? "white" : "#e76f51") << "\" stroke=\"" << (p.hollow ? "#888" : "#9c3d25")
        << "\" stroke-width=\"1.5\"><title>" << p.index << "</title></circle>\n";
      o << "<text x=\"" << num(px + 7) << "\" y=\"" << num(py - 6) << "\" font-size=\"11\" fill=\"#333\">" << p.index
        << "</text>\n";
    }
  }

 private:
  void ticks(std::ostream& o) const {
    for (int d = static_cast<int>(std::floor(lo_)); d <= static_cast<int>(std::ceil(hi_)); ++d)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, d);
        if (v < lo() || v > hi()) continue;
        o << "<line x1=\"" << num(x(v)) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(x(v)) << "\" y2=\""
          << num(kTop + kPanelH) << "\" stroke=\"#e5e5e5\"/>\n";
        o << "<line x1=\"" << num(x0_) << "\" y1=\"" << num(y(v)) << "\" x2=\"" << num(x0_ + kPanelW) << "\" y2=\""
          << num(y(v)) << "\" stroke=\"#e5e5e5\"/>\n";
        o << "<text x=\"" << num(x(v)) << "\" y=\"" << num(kTop + kPanelH + 18)
          << "\" text-anchor=\"middle\" font-size=\"11\">" << tick_label(v) << "</text>\n";
        o << "<text x=\"" << num(x0_ - 6) << "\" y=\"" << num(y(v) + 4) << "\" text-anchor=\"end\" font-size=\"11\">"
          << tick_label(v) << "</text>\n";
      }
  }

  double x0_;
  double lo_ = 0, hi_ = 1;  // log10 of the axis range (same on x and y)
};

std::string percent(double e) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f %%", 100 * e);
  return b;
}

}  // namespace

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
    const double meas = rank < run.measured_peak_per_rank.size() ? run.measured_peak_per_rank[rank] : run.measured_peak_bytes;
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

}  // namespace shardplan::planner
