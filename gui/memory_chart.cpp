#include "memory_chart.hpp"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QValueAxis>
#include <algorithm>
#include <iterator>

#include "units.hpp"

namespace shardplan::gui {

namespace {

struct Kind {
  const char* name;
  double simulator::MemoryBreakdown::*field;
  QColor color;
};

const Kind kKinds[] = {{"parameters", &simulator::MemoryBreakdown::parameters, QColor(0x4e, 0x79, 0xa7)},
                       {"gradients", &simulator::MemoryBreakdown::gradients, QColor(0xf2, 0x8e, 0x2b)},
                       {"optimizer", &simulator::MemoryBreakdown::optimizer_states, QColor(0xe1, 0x57, 0x59)},
                       {"activations", &simulator::MemoryBreakdown::activations, QColor(0x76, 0xb7, 0xb2)},
                       {"LoRA", &simulator::MemoryBreakdown::lora, QColor(0x59, 0xa1, 0x4f)},
                       {"buffers", &simulator::MemoryBreakdown::comm_buffers, QColor(0xed, 0xc9, 0x48)},
                       {"workspace", &simulator::MemoryBreakdown::workspace, QColor(0xb0, 0x7a, 0xa1)},
                       {"runtime context", &simulator::MemoryBreakdown::runtime_context, QColor(0x9c, 0x75, 0x5f)},
                       {"communicators", &simulator::MemoryBreakdown::communicators, QColor(0xff, 0x9d, 0xa7)},
                       {"library workspace", &simulator::MemoryBreakdown::library_workspace, QColor(0xba, 0xb0, 0xac)}};

static_assert(std::size(kKinds) == MemoryChart::kKindCount, "memory_chart.hpp documents every kind");

QLineSeries* hline(const QString& name, double y, int stages, QColor color, Qt::PenStyle style) {
  auto* s = new QLineSeries;
  s->setName(name);
  s->append(-0.5, y);
  s->append(stages - 0.5, y);
  QPen pen(color);
  pen.setWidth(2);
  pen.setStyle(style);
  s->setPen(pen);
  return s;
}

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  chart()->setTitle("Memory per device, by pipeline stage");
  chart()->legend()->setAlignment(Qt::AlignRight);
  setMinimumSize(360, 220);
}

double MemoryChart::value(int kind, int stage) const {
  const auto series = chart()->series();
  for (auto* s : series)
    if (auto* bars = qobject_cast<QStackedBarSeries*>(s)) {
      if (kind < 0 || kind >= bars->count()) return 0;
      return bars->barSets().at(kind)->at(stage);
    }
  return 0;
}

void MemoryChart::showPrediction(const simulator::Prediction* p, std::optional<double> measured_peak_bytes) {
  QChart* c = chart();
  c->removeAllSeries();
  for (auto* axis : c->axes()) {
    c->removeAxis(axis);
    delete axis;
  }
  stages_ = 0;
  capacity_gib_ = 0;
  measured_ = false;
  if (!p || p->stages.empty()) return;
  stages_ = static_cast<int>(p->stages.size());
  capacity_gib_ = p->device_capacity_bytes / kGiB;
  auto* bars = new QStackedBarSeries;
  for (const Kind& k : kKinds) {
    auto* set = new QBarSet(k.name);
    set->setColor(k.color);
    set->setBorderColor(k.color.darker(120));
    for (const auto& st : p->stages) *set << st.memory.*k.field / kGiB;
    bars->append(set);
  }
  QStringList cats;
  double top = capacity_gib_;
  for (const auto& st : p->stages) {
    cats << (stages_ > 12 ? QString::number(st.stage) : QString("stage %1").arg(st.stage));
    top = std::max(top, st.memory.total() / kGiB);
  }
  c->addSeries(bars);
  auto* x = new QBarCategoryAxis;
  x->append(cats);
  auto* y = new QValueAxis;
  y->setTitleText("GiB per device");
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  bars->attachAxis(x);
  bars->attachAxis(y);
  std::vector<QLineSeries*> lines{hline(QString("capacity %1").arg(format_gib(p->device_capacity_bytes)), capacity_gib_,
                                        stages_, Qt::black, Qt::SolidLine),
                                  hline("usable", p->usable_bytes / kGiB, stages_, Qt::darkGray, Qt::DashLine)};
  if (measured_peak_bytes) {
    lines.push_back(hline(QString("measured peak %1").arg(format_gib(*measured_peak_bytes)),
                          *measured_peak_bytes / kGiB, stages_, Qt::red, Qt::DotLine));
    top = std::max(top, *measured_peak_bytes / kGiB);
    measured_ = true;
  }
  auto* lx = new QValueAxis;  // the lines span the categories: -0.5 .. stages - 0.5
  lx->setRange(-0.5, stages_ - 0.5);
  lx->setVisible(false);
  c->addAxis(lx, Qt::AlignTop);
  for (auto* l : lines) {
    c->addSeries(l);
    l->attachAxis(lx);
    l->attachAxis(y);
  }
  y->setRange(0, top * 1.08);
  y->applyNiceNumbers();
}

}  // namespace shardplan::gui
