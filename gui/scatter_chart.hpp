#pragma once
// ScatterChart: every feasible candidate as a point — time to train vs cost (per 1B tokens
// when no token budget is set), or throughput vs memory — with the 2-D Pareto front of the
// plotted axes highlighted and joined. Clicking a point emits its source row.
#include <QChartView>
#include <vector>

#include "candidate_row.hpp"
#include "pareto.hpp"

class QScatterSeries;

namespace shardplan::gui {

class ScatterChart : public QChartView {
  Q_OBJECT
 public:
  enum class Mode { time_vs_cost, throughput_vs_memory };
  explicit ScatterChart(QWidget* parent = nullptr);

  void setRows(const std::vector<CandidateRow>& rows, double train_tokens);
  void setMode(Mode m);
  [[nodiscard]] Mode mode() const { return mode_; }
  void setSelectedRow(int row);  // -1 = none

  [[nodiscard]] const std::vector<PlotPoint>& points() const { return points_; }
  [[nodiscard]] std::vector<int> frontRows() const;
  // Where the point of `row` is drawn, in viewport coordinates (tests click it).
  [[nodiscard]] QPoint positionOfRow(int row) const;

 signals:
  void rowClicked(int row);

 private:
  void rebuild();
  void onPointClicked(const QPointF& p);

  std::vector<CandidateRow> rows_;  // shallow copies (shared predictions)
  double train_tokens_ = 0;
  Mode mode_ = Mode::time_vs_cost;
  int selected_ = -1;
  std::vector<PlotPoint> points_;  // display values (x, y) as plotted
  std::vector<int> front_;         // indices into points_
  QScatterSeries* all_ = nullptr;
};

}  // namespace shardplan::gui
