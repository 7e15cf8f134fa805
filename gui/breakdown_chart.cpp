#include "breakdown_chart.hpp"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QHorizontalStackedBarSeries>
#include <QValueAxis>

#include "units.hpp"

namespace shardplan::gui {

std::vector<std::pair<QString, double>> step_parts(const simulator::TimeBreakdown& t) {
  return {{"compute", t.forward_compute_s + t.backward_compute_s},
          {"recompute", t.recompute_s},
          {"TP comm", t.tp_comm_s},
          {"bubble", t.pipeline_bubble_s},
          {"DP comm", t.dp_exposed_comm_s},
          {"offload", t.offload_exposed_s},
          {"optimizer", t.optimizer_s},
          {"sync wait", t.sync_wait_s},
          {"CP comm", t.cp_comm_s},
          {"EP all-to-all", t.ep_comm_s}};
}

BreakdownChart::BreakdownChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  chart()->setTitle("Step time breakdown");
  chart()->legend()->setAlignment(Qt::AlignBottom);
  setMinimumSize(360, 200);
}

void BreakdownChart::showPrediction(const simulator::Prediction* p, const formats::RunReport::Measured* measured) {
  static const QColor colors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0x9c, 0x75, 0x5f), QColor(0xf2, 0x8e, 0x2b),
                                  QColor(0xba, 0xb0, 0xac), QColor(0xe1, 0x57, 0x59), QColor(0x76, 0xb7, 0xb2),
                                  QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48), QColor(0xb0, 0x7a, 0xa1),
                                  QColor(0xff, 0x9d, 0xa7)};
  QChart* c = chart();
  c->removeAllSeries();
  for (auto* axis : c->axes()) {
    c->removeAxis(axis);
    delete axis;
  }
  parts_.clear();
  measured_ = false;
  if (!p) return;
  parts_ = step_parts(p->time);
  // Measured parts in the same order: shardrun reports compute, TP, DP and optimizer time (its
  // TP and DP times include the waits for the slowest rank).
  std::vector<double> meas(parts_.size(), 0.0);
  if (measured) {
    meas[0] = measured->compute_s;
    meas[2] = measured->tp_comm_s;
    meas[4] = measured->dp_comm_s;
    meas[6] = measured->optimizer_s;
    measured_ = true;
  }
  auto* series = new QHorizontalStackedBarSeries;
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    auto* set = new QBarSet(QString("%1 %2").arg(parts_[i].first, format_seconds(parts_[i].second)));
    set->setColor(colors[i]);
    *set << parts_[i].second;
    if (measured_) *set << meas[i];
    series->append(set);
  }
  c->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(QString("predicted\n%1").arg(format_seconds(p->time.step_s)));
  if (measured_) y->append(QString("measured\n%1").arg(format_seconds(measured->step_s)));
  auto* x = new QValueAxis;
  x->setTitleText("seconds per step");
  c->addAxis(y, Qt::AlignLeft);
  c->addAxis(x, Qt::AlignBottom);
  series->attachAxis(y);
  series->attachAxis(x);
  x->setMin(0);
  x->applyNiceNumbers();
}

}  // namespace shardplan::gui
