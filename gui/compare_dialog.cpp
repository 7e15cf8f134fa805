#include "compare_dialog.hpp"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <functional>

#include "breakdown_chart.hpp"
#include "candidates_model.hpp"
#include "units.hpp"

namespace shardplan::gui {

namespace {

struct Metric {
  QString name;
  std::function<double(const CandidateRow&)> value;  // NaN = not known
  std::function<QString(double)> format;
  int better = 0;  // -1 lower is better, +1 higher, 0 not ranked
};

double pred(const CandidateRow& r, const std::function<double(const simulator::Prediction&)>& f) {
  return r.prediction ? f(*r.prediction) : std::nan("");
}

std::vector<Metric> metrics() {
  auto gib = [](double b) { return format_gib(b); };
  auto secs = [](double s) { return format_seconds(s); };
  std::vector<Metric> m{
      {"Tokens/s", [](const CandidateRow& r) { return r.tokens_per_s(); }, [](double v) { return format_rate(v); }, +1},
      {"Step time", [](const CandidateRow& r) { return r.step_s(); }, secs, -1},
      {"MFU", [](const CandidateRow& r) { return r.mfu(); },
       [](double v) { return QString::number(100 * v, 'f', 1) + " %"; }, +1},
      {"Memory/device", [](const CandidateRow& r) { return r.worst_memory_bytes(); }, gib, -1},
      {"$/hour", [](const CandidateRow& r) { return r.usd_per_hour(); }, [](double v) { return format_usd(v); }, -1},
      {"Train time",
       [](const CandidateRow& r) {
         return pred(r, [](const auto& p) { return p.train_time_s.value_or(std::nan("")); });
       },
       secs, -1},
      {"Train cost",
       [](const CandidateRow& r) {
         return pred(r, [](const auto& p) { return p.train_cost_usd.value_or(std::nan("")); });
       },
       [](double v) { return format_usd(v); }, -1}};
  const char* kinds[] = {"parameters", "gradients", "optimizer",       "activations",   "LoRA",
                         "buffers",    "workspace", "runtime context", "communicators", "library workspace"};
  double simulator::MemoryBreakdown::*fields[] = {&simulator::MemoryBreakdown::parameters,
                                                  &simulator::MemoryBreakdown::gradients,
                                                  &simulator::MemoryBreakdown::optimizer_states,
                                                  &simulator::MemoryBreakdown::activations,
                                                  &simulator::MemoryBreakdown::lora,
                                                  &simulator::MemoryBreakdown::comm_buffers,
                                                  &simulator::MemoryBreakdown::workspace,
                                                  &simulator::MemoryBreakdown::runtime_context,
                                                  &simulator::MemoryBreakdown::communicators,
                                                  &simulator::MemoryBreakdown::library_workspace};
  for (int k = 0; k < 10; ++k) {
    auto f = fields[k];
    m.push_back({QString("  memory: %1").arg(kinds[k]),
                 [f](const CandidateRow& r) { return pred(r, [f](const auto& p) { return p.worst.*f; }); }, gib, 0});
  }
  for (int i = 0; i < 7; ++i)
    m.push_back({"  step: " + step_parts({}).at(static_cast<std::size_t>(i)).first,
                 [i](const CandidateRow& r) {
                   return pred(
                       r, [i](const auto& p) { return step_parts(p.time).at(static_cast<std::size_t>(i)).second; });
                 },
                 secs, 0});
  return m;
}

}  // namespace

CompareDialog::CompareDialog(const std::vector<CandidateRow>& rows, QWidget* parent) : QDialog(parent) {
  setWindowTitle(QString("Compare %1 candidates").arg(rows.size()));
  const std::vector<Metric> ms = metrics();
  table_ = new QTableWidget(static_cast<int>(ms.size()) + 2, static_cast<int>(rows.size()), this);
  QStringList vheaders{"Configuration", "Status"};
  for (const auto& m : ms) vheaders << m.name;
  table_->setVerticalHeaderLabels(vheaders);
  QStringList hheaders;
  for (std::size_t c = 0; c < rows.size(); ++c) {
    const auto& r = rows[c];
    hheaders << (r.rank > 0 ? QString("#%1").arg(r.rank) : QString("candidate %1").arg(c + 1));
    auto* cfg = new QTableWidgetItem(QString::fromStdString(r.candidate.key).replace(' ', '\n'));
    table_->setItem(0, static_cast<int>(c), cfg);
    table_->setItem(1, static_cast<int>(c), new QTableWidgetItem(status_text(r)));
  }
  table_->setHorizontalHeaderLabels(hheaders);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    std::vector<double> v;
    for (const auto& r : rows) v.push_back(ms[i].value(r));
    int best = -1;
    for (std::size_t c = 0; c < v.size(); ++c) {
      if (std::isnan(v[c]) || ms[i].better == 0) continue;
      if (best < 0 || (ms[i].better < 0 ? v[c] < v[best] : v[c] > v[best])) best = static_cast<int>(c);
    }
    for (std::size_t c = 0; c < v.size(); ++c) {
      auto* item = new QTableWidgetItem(std::isnan(v[c]) ? QStringLiteral("–") : ms[i].format(v[c]));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (static_cast<int>(c) == best) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      table_->setItem(static_cast<int>(i) + 2, static_cast<int>(c), item);
    }
  }
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->resizeColumnsToContents();
  table_->resizeRowsToContents();
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(table_);
  layout->addWidget(buttons);
  resize(900, 640);
}

}  // namespace shardplan::gui
