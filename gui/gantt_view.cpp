#include "gantt_view.hpp"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "units.hpp"

namespace shardplan::gui {

namespace {
constexpr int kLeft = 64, kRight = 12, kTop = 28, kBottom = 40;
const QColor kForward(0x4e, 0x79, 0xa7), kBackward(0xf2, 0x8e, 0x2b), kWeight(0x59, 0xa1, 0x4f),
    kIdle(0xee, 0xee, 0xee);
}  // namespace

GanttView::GanttView(QWidget* parent) : QWidget(parent) {
  setMinimumSize(360, 180);
  setFocusPolicy(Qt::NoFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void GanttView::setSchedule(const simulator::PipelineResult* pipeline, int stages, const QString& title) {
  events_.clear();
  stages_ = 0;
  makespan_ = 0;
  title_ = title;
  if (pipeline) {
    events_ = pipeline->events;
    stages_ = stages;
    for (const auto& e : events_) makespan_ = std::max(makespan_, e.end_s);
  }
  update();
}

QRectF GanttView::plotArea() const {
  return QRectF(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom));
}

QRectF GanttView::eventRect(const simulator::PipelineEvent& ev) const {
  const QRectF a = plotArea();
  const double row = a.height() / std::max(1, stages_);
  const double x0 = a.left() + a.width() * ev.start_s / makespan_;
  const double x1 = a.left() + a.width() * ev.end_s / makespan_;
  return QRectF(x0, a.top() + row * ev.stage + row * 0.12, std::max(1.0, x1 - x0), row * 0.76);
}

int GanttView::eventAt(QPoint pos) const {
  if (makespan_ <= 0) return -1;
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (eventRect(events_[i]).contains(pos)) return static_cast<int>(i);
  return -1;
}

void GanttView::drawAxis(QPainter& p, const QRectF& a) const {
  p.setPen(palette().color(QPalette::WindowText));
  const double row = a.height() / std::max(1, stages_);
  for (int s = 0; s < stages_; ++s)
    p.drawText(QRectF(4, a.top() + row * s, kLeft - 8, row), Qt::AlignRight | Qt::AlignVCenter,
               QString("stage %1").arg(s));
  const int ticks = 6;
  for (int i = 0; i <= ticks; ++i) {
    const double x = a.left() + a.width() * i / ticks;
    p.drawLine(QPointF(x, a.bottom()), QPointF(x, a.bottom() + 4));
    p.drawText(QRectF(x - 40, a.bottom() + 4, 80, 16), Qt::AlignCenter, format_seconds(makespan_ * i / ticks));
  }
}

void GanttView::drawLegend(QPainter& p) const {
  const QString text[] = {"forward", "backward (+recompute)", "weight gradient (W, split off)", "idle"};
  const QColor col[] = {kForward, kBackward, kWeight, kIdle};
  double x = kLeft;
  const double y = height() - 16;
  for (int i = 0; i < 4; ++i) {
    p.fillRect(QRectF(x, y, 12, 12), col[i]);
    p.setPen(Qt::gray);
    p.drawRect(QRectF(x, y, 12, 12));
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QPointF(x + 16, y + 11), text[i]);
    x += 24 + p.fontMetrics().horizontalAdvance(text[i]);
  }
}

void GanttView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  p.setPen(palette().color(QPalette::WindowText));
  QFont bold = p.font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(QRectF(0, 4, width(), 20), Qt::AlignCenter,
             title_.isEmpty() ? QStringLiteral("Pipeline schedule (select a candidate)") : title_);
  p.setFont(font());
  if (stages_ <= 0 || makespan_ <= 0) return;
  const QRectF a = plotArea();
  p.fillRect(a, kIdle);
  p.setRenderHint(QPainter::Antialiasing, false);
  for (const auto& ev : events_) {
    const QRectF r = eventRect(ev);
    QColor c = ev.weight ? kWeight : ev.backward ? kBackward : kForward;
    if (ev.chunk > 0) c = c.lighter(100 + 25 * ev.chunk);
    p.fillRect(r, c);
    if (r.width() > 6) {
      p.setPen(c.darker(140));
      p.drawRect(r);
    }
    const QString label = QString::number(ev.micro_batch);
    if (r.width() > p.fontMetrics().horizontalAdvance(label) + 4 && r.height() > p.fontMetrics().height()) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, label);
    }
  }
  drawAxis(p, a);
  drawLegend(p);
}

bool GanttView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int i = eventAt(help->pos());
    if (i < 0) {
      QToolTip::hideText();
    } else {
      const auto& ev = events_[static_cast<std::size_t>(i)];
      QToolTip::showText(help->globalPos(),
                         QString("stage %1, %2 micro-batch %3%4\n%5 – %6")
                             .arg(ev.stage)
                             .arg(ev.weight     ? "weight gradient (W)"
                                  : ev.backward ? "backward"
                                                : "forward")
                             .arg(ev.micro_batch)
                             .arg(ev.chunk > 0 ? QString(", chunk %1").arg(ev.chunk) : QString())
                             .arg(format_seconds(ev.start_s), format_seconds(ev.end_s)),
                         this);
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace shardplan::gui
