#pragma once
// GanttView: the simulated pipeline schedule of one step — a row per stage, time across,
// forward (blue), backward (orange, incl. recompute) and, under a zero-bubble schedule, the
// split-off weight gradient W (green) per micro-batch (lighter shades for later model chunks),
// idle time left grey. Drawn from Prediction::pipeline.events.
#include <QWidget>
#include <vector>

#include "simulator/pipeline_schedule.hpp"

namespace shardplan::gui {

class GanttView : public QWidget {
  Q_OBJECT
 public:
  explicit GanttView(QWidget* parent = nullptr);
  void setSchedule(const simulator::PipelineResult* pipeline, int stages, const QString& title);

  [[nodiscard]] int eventCount() const { return static_cast<int>(events_.size()); }
  [[nodiscard]] int stageCount() const { return stages_; }
  [[nodiscard]] double makespan() const { return makespan_; }
  // Index of the event drawn at `pos`, or -1.
  [[nodiscard]] int eventAt(QPoint pos) const;
  [[nodiscard]] QSize sizeHint() const override { return {520, 260}; }

 protected:
  void paintEvent(QPaintEvent* e) override;
  bool event(QEvent* e) override;

 private:
  [[nodiscard]] QRectF plotArea() const;
  [[nodiscard]] QRectF eventRect(const simulator::PipelineEvent& ev) const;
  void drawAxis(QPainter& p, const QRectF& area) const;
  void drawLegend(QPainter& p) const;

  std::vector<simulator::PipelineEvent> events_;
  int stages_ = 0;
  double makespan_ = 0;
  QString title_;
};

}  // namespace shardplan::gui
