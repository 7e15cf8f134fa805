#include "scatter_chart.hpp"

#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
#include <cmath>
#include <limits>

#include "units.hpp"

namespace shardplan::gui {

namespace {

constexpr double kBillion = 1e9;

// (x, y) of a row in the mode's display units; false when it cannot be plotted.
bool coordinates(const CandidateRow& r, ScatterChart::Mode mode, double train_tokens, double& x, double& y) {
  if (!r.feasible() || r.tokens_per_s() <= 0) return false;
  if (mode == ScatterChart::Mode::throughput_vs_memory) {
    x = r.worst_memory_bytes() / kGiB;
    y = r.tokens_per_s();
    return true;
  }
  const double tokens = train_tokens > 0 ? train_tokens : kBillion;
  const double seconds = tokens / r.tokens_per_s();
  x = seconds / 3600.0;
  y = seconds / 3600.0 * r.usd_per_hour();
  return std::isfinite(x) && std::isfinite(y);
}

// [lo, hi] padded by 6 % (or +-1 around a single value) so edge points stay visible.
std::pair<double, double> padded(double lo, double hi) {
  if (!(hi > lo)) return {lo - std::max(1.0, std::abs(lo) * 0.1), hi + std::max(1.0, std::abs(hi) * 0.1)};
  const double pad = (hi - lo) * 0.06;
  return {lo - pad, hi + pad};
}

void add_axes(QChart* c, const QString& xt, const QString& yt, const std::vector<PlotPoint>& pts) {
  auto* x = new QValueAxis;
  auto* y = new QValueAxis;
  if (!pts.empty()) {
    double x0 = pts[0].x, x1 = x0, y0 = pts[0].y, y1 = y0;
    for (const auto& p : pts) {
      x0 = std::min(x0, p.x), x1 = std::max(x1, p.x);
      y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
    }
    const auto [xa, xb] = padded(x0, x1);
    const auto [ya, yb] = padded(y0, y1);
    x->setRange(xa, xb);
    y->setRange(ya, yb);
  }
  x->setTitleText(xt);
  y->setTitleText(yt);
  x->setLabelFormat("%.3g");
  y->setLabelFormat("%.3g");
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  for (auto* s : c->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
}

}  // namespace

ScatterChart::ScatterChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  chart()->legend()->setAlignment(Qt::AlignBottom);
  setMinimumSize(360, 220);
  rebuild();
}

void ScatterChart::setRows(const std::vector<CandidateRow>& rows, double train_tokens) {
  rows_ = rows;
  train_tokens_ = train_tokens;
  selected_ = -1;
  rebuild();
}

void ScatterChart::setMode(Mode m) {
  mode_ = m;
  rebuild();
}

void ScatterChart::setSelectedRow(int row) {
  if (row == selected_) return;
  selected_ = row;
  rebuild();
}

std::vector<int> ScatterChart::frontRows() const {
  std::vector<int> rows;
  for (int i : front_) rows.push_back(points_[static_cast<std::size_t>(i)].row);
  return rows;
}

QPoint ScatterChart::positionOfRow(int row) const {
  for (const auto& p : points_)
    if (p.row == row && all_) {
      const QPointF scene = chart()->mapToPosition(QPointF(p.x, p.y), all_);
      return mapFromScene(chart()->mapToScene(scene));
    }
  return {-1, -1};
}

void ScatterChart::onPointClicked(const QPointF& clicked) {
  // The nearest plotted point in screen space (the series reports the point's own value).
  int best = -1;
  double best_d = std::numeric_limits<double>::infinity();
  const QPointF at = chart()->mapToPosition(clicked, all_);
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const QPointF q = chart()->mapToPosition(QPointF(points_[i].x, points_[i].y), all_);
    const double d = std::hypot(q.x() - at.x(), q.y() - at.y());
    if (d < best_d) {
      best_d = d;
      best = static_cast<int>(i);
    }
  }
  if (best >= 0) emit rowClicked(points_[static_cast<std::size_t>(best)].row);
}

void ScatterChart::rebuild() {
  QChart* c = chart();
  c->removeAllSeries();
  for (auto* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
  points_.clear();
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    double x = 0, y = 0;
    if (coordinates(rows_[i], mode_, train_tokens_, x, y)) points_.push_back({static_cast<int>(i), x, y});
  }
  const bool tput = mode_ == Mode::throughput_vs_memory;
  // Minimise memory and maximise throughput: the front of (x, -y).
  std::vector<PlotPoint> keyed = points_;
  if (tput)
    for (auto& p : keyed) p.y = -p.y;
  front_ = pareto_front(keyed);

  all_ = new QScatterSeries;
  all_->setName("candidates");
  all_->setMarkerSize(8);
  all_->setColor(QColor(0x4e, 0x79, 0xa7, 170));
  all_->setBorderColor(Qt::transparent);
  for (const auto& p : points_) all_->append(p.x, p.y);
  auto* line = new QLineSeries;
  line->setName("Pareto front");
  line->setPen(QPen(QColor(0xe1, 0x57, 0x59), 2));
  auto* front = new QScatterSeries;
  front->setName("Pareto point");
  front->setMarkerSize(11);
  front->setColor(QColor(0xe1, 0x57, 0x59));
  for (int i : front_) {
    line->append(points_[i].x, points_[i].y);
    front->append(points_[i].x, points_[i].y);
  }
  auto* sel = new QScatterSeries;
  sel->setName("selected");
  sel->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  sel->setMarkerSize(14);
  sel->setColor(Qt::transparent);
  sel->setBorderColor(Qt::black);
  sel->setPen(QPen(Qt::black, 2));
  for (const auto& p : points_)
    if (p.row == selected_) sel->append(p.x, p.y);
  c->addSeries(line);
  c->addSeries(all_);
  c->addSeries(front);
  c->addSeries(sel);
  connect(all_, &QScatterSeries::clicked, this, &ScatterChart::onPointClicked);
  connect(front, &QScatterSeries::clicked, this, &ScatterChart::onPointClicked);
  const QString budget = train_tokens_ > 0 ? format_count(train_tokens_) + " tokens" : QStringLiteral("1 B tokens");
  if (tput) {
    c->setTitle("Throughput vs memory per device");
    add_axes(c, "GiB per device (fullest stage)", "tokens/s", points_);
  } else {
    bool priced = false;
    for (const auto& p : points_) priced = priced || p.y > 0;
    c->setTitle("Time vs cost to train " + budget + (priced || points_.empty() ? "" : " (price unknown: $0)"));
    add_axes(c, "hours", "US$", points_);
  }
}

}  // namespace shardplan::gui
