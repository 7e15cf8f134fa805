// MainWindow: export, open plan / report, compare, details and the session.
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QFileDialog>
#include <QItemSelectionModel>
#include <QLineEdit>
#include <QSettings>
#include <QSplitter>
#include <QTableView>
#include <QTextBrowser>

#include "breakdown_chart.hpp"
#include "candidate_filter.hpp"
#include "candidates_model.hpp"
#include "compare_dialog.hpp"
#include "formats/plan.hpp"
#include "inputs_panel.hpp"
#include "interop/launch_export.hpp"
#include "main_window.hpp"
#include "plan_export.hpp"
#include "scatter_chart.hpp"
#include "session_store.hpp"
#include "simulator/errors.hpp"
#include "units.hpp"

namespace shardplan::gui {

namespace pl = shardplan::planner;
namespace sim = shardplan::simulator;

namespace {

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

QString summary_html(const CandidateRow& r) {
  const auto& p = *r.prediction;
  QString h = QString("<h3>%1</h3><p>%2 · %3 × %4 · %5</p>")
                  .arg(esc(r.candidate.key), status_text(r).toHtmlEscaped())
                  .arg(r.candidate.cluster.nodes)
                  .arg(esc(r.candidate.cluster.hardware.name), esc(p.model_name));
  h += QString("<p><b>%1</b> · step %2 · MFU %3 % · %4 per device of %5 · %6/hour")
           .arg(format_rate(p.tokens_per_s), format_seconds(p.time.step_s))
           .arg(100 * p.mfu, 0, 'f', 1)
           .arg(format_gib(p.worst.total()), format_gib(p.device_capacity_bytes), format_usd(p.price_usd_per_hour));
  if (p.train_time_s && p.train_cost_usd)
    h += QString(" · %1 tokens in %2 for %3")
             .arg(format_count(p.train_tokens.value_or(0)), format_seconds(*p.train_time_s),
                  format_usd(*p.train_cost_usd));
  h += QString("<br>%1 parameters, %2 trainable</p>")
           .arg(format_count(static_cast<double>(p.total_parameters)),
                format_count(static_cast<double>(p.trainable_parameters)));
  return h;
}

}  // namespace

void MainWindow::updateDetails(int source_row) {
  QString h;
  const pl::SearchResult* result = outcome_ ? &outcome_->result : nullptr;
  if (source_row >= 0) {
    const CandidateRow& r = model_->row(source_row);
    if (r.prediction) h += summary_html(r);
    else h += "<h3>" + esc(r.candidate.key) + "</h3><p>estimate only (the search is still running)</p>";
    if (!r.feasible()) {
      h += "<h4>Why not</h4><p>";
      if (r.prediction) h += esc(r.prediction->infeasible_reason) + "<br>";
      if (outcome_ && r.model)
        h += esc(pl::why_not(*r.model, r.candidate.cluster, r.candidate.config, *result, outcome_->request.constraints,
                             outcome_->request.options.objective));
      h += "</p>";
    } else if (r.prediction && r.rank != 1 && outcome_ && r.model && r.origin != Origin::opened) {
      h += "<h4>Why not the plan</h4><p>" +
           esc(pl::why_not(*r.model, r.candidate.cluster, r.candidate.config, *result, outcome_->request.constraints,
                           outcome_->request.options.objective)) +
           "</p>";
    }
    if (r.prediction && r.prediction->feasible && r.model) {
      try {
        const formats::Plan plan =
            make_plan(r, outcome_ ? outcome_->request.search_settings : nlohmann::json::object());
        h += "<h4>Launch (mpirun)</h4><pre>" +
             esc(interop::mpirun_command(plan, "plan.json", cli_export_options(plan).mpirun)) + "</pre>";
      } catch (const std::exception& e) { h += "<p>" + esc(e.what()) + "</p>"; }
    }
  }
  if (measured_) {
    const auto& m = measured_->measured;
    const double predicted_step_s = measured_->predicted ? measured_->predicted->step_s : 0;
    h += QString("<h4>Measured (%1)</h4><p>step %2 (predicted in report %3), %4, peak %5 per rank</p>")
             .arg(measured_path_.toHtmlEscaped(), format_seconds(m.step_s), format_seconds(predicted_step_s),
                  format_rate(m.tokens_per_s), format_gib(static_cast<double>(m.peak_bytes)));
  }
  if (result && !result->rejected.empty()) {
    h += "<h4>Regions where nothing qualifies</h4><ul>";
    for (const auto& reg : result->rejected) h += "<li><b>" + esc(reg.region) + "</b>: " + esc(reg.reason) + "</li>";
    h += "</ul>";
  }
  if (h.isEmpty()) h = "<p>Run a search (Ctrl+R) or open a plan (Ctrl+O).</p>";
  details_->setHtml(h);
}

bool MainWindow::exportRow(int source_row, const QString& plan_path) {
  if (source_row < 0 || source_row >= model_->rowCount()) return false;
  try {
    const CandidateRow& r = model_->row(source_row);
    const formats::Plan plan = make_plan(r, outcome_ ? outcome_->request.search_settings : nlohmann::json::object());
    const auto written = export_plan(plan, plan_path.toStdString());
    setStatus(QString("Exported %1 files: %2 and the launch files beside it").arg(written.size()).arg(plan_path));
    return true;
  } catch (const std::exception& e) {
    setStatus(QString("Export failed: ") + e.what());
    return false;
  }
}

void MainWindow::exportSelected() {
  const int row = selectedSourceRow();
  if (row < 0) return;
  const QString path = QFileDialog::getSaveFileName(this, "Export plan (launch files are written beside it)",
                                                    "plan.json", "Plan (*.json)");
  if (!path.isEmpty()) exportRow(row, path);
}

bool MainWindow::openPlan(const QString& path) {
  try {
    const formats::Plan plan = formats::load_plan(path.toStdString());
    CandidateRow row;
    row.candidate.cluster = plan.cluster;
    row.candidate.config = plan.config;
    row.candidate.key = pl::describe(plan.config, plan.cluster.nodes);
    row.candidate.estimate.fits = plan.prediction.feasible;
    row.model = std::make_shared<const sim::ModelSpec>(plan.model);
    row.prediction = std::make_shared<const sim::Prediction>(plan.prediction);
    row.origin = Origin::opened;
    row.search_settings = plan.search;
    const int at = model_->addRow(std::move(row));
    scatter_->setRows(model_->rows(), outcome_ ? outcome_->request.options.train_tokens : 0);
    selectSourceRow(at);
    setStatus("Opened " + path);
    return true;
  } catch (const std::exception& e) {
    setStatus(QString("Cannot open the plan: ") + e.what());
    return false;
  }
}

void MainWindow::openPlanDialog() {
  const QString path = QFileDialog::getOpenFileName(this, "Open plan.json", {}, "Plan (*.json)");
  if (!path.isEmpty()) openPlan(path);
}

bool MainWindow::openReport(const QString& path) {
  try {
    measured_ = formats::load_run_report(path.toStdString());
    measured_path_ = path;
    setStatus("Measured run " + path + " overlaid on the selected candidate");
    onCurrentChanged();
    return true;
  } catch (const std::exception& e) {
    setStatus(QString("Cannot open the report: ") + e.what());
    return false;
  }
}

void MainWindow::openReportDialog() {
  const QString path = QFileDialog::getOpenFileName(this, "Open shardrun report.json", {}, "Report (*.json)");
  if (!path.isEmpty()) openReport(path);
}

CompareDialog* MainWindow::compareRows(const std::vector<int>& source_rows) {
  std::vector<CandidateRow> rows;
  for (int r : source_rows)
    if (r >= 0 && r < model_->rowCount()) rows.push_back(model_->row(r));
  if (rows.size() < 2) {
    setStatus("Select two or more candidates to compare (Shift/Ctrl + click or Shift + arrows)");
    return nullptr;
  }
  auto* dlg = new CompareDialog(rows, this);
  dlg->setAttribute(Qt::WA_DeleteOnClose);
  dlg->show();
  return dlg;
}

void MainWindow::compareSelected() {
  std::vector<int> rows;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows()) rows.push_back(proxy_->mapToSource(i).row());
  std::sort(rows.begin(), rows.end());
  compareRows(rows);
}

void MainWindow::setScatterMode(int index) { scatter_mode_->setCurrentIndex(index == 1 ? 1 : 0); }

void MainWindow::saveSession() {
  Session s;
  s.request = inputs_->request();
  s.geometry = saveGeometry();
  s.state = saveState();
  s.splitter = main_split_->saveState();
  s.scatter_mode = scatter_mode_->currentIndex();
  s.filter = filter_edit_->text();
  s.feasible_only = feasible_only_->isChecked();
  save_session(*settings_, s);
}

void MainWindow::restoreSession() {
  const Session s = load_session(*settings_);
  inputs_->setRequest(s.request);
  if (!s.geometry.isEmpty()) restoreGeometry(s.geometry);
  if (!s.state.isEmpty()) restoreState(s.state);
  if (!s.splitter.isEmpty()) main_split_->restoreState(s.splitter);
  scatter_mode_->setCurrentIndex(s.scatter_mode == 1 ? 1 : 0);
  filter_edit_->setText(s.filter);
  feasible_only_->setChecked(s.feasible_only);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  worker_->cancel();
  saveSession();
  e->accept();
}

}  // namespace shardplan::gui
