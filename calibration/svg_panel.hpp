#pragma once
// A square log-log SVG panel (predicted on x, measured on y, the y = x line and a +-10 % band)
// shared by the validation plots of shardrun runs and of recorded (published) runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace shardplan::calibration::svg {

constexpr double kPanelW = 430, kPanelH = 380;  // plot area of one panel
constexpr double kLeft = 80, kTop = 60, kGap = 120;
constexpr double kBand = 0.10;

inline std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

inline std::string tick_label(double v) {
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
    o << "<text x=\"" << num(cx) << "\" y=\"" << num(cy)
      << "\" text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 " << num(cx) << " " << num(cy)
      << ")\">measured (" << esc(unit) << ")</text>\n";
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

inline std::string percent(double e) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f %%", 100 * e);
  return b;
}

}  // namespace shardplan::calibration::svg
