// MainWindow: layout, the search (start, stream, finish, cancel) and the selection.
#include "main_window.hpp"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QToolBar>
#include <QVBoxLayout>

#include "breakdown_chart.hpp"
#include "candidate_filter.hpp"
#include "candidates_model.hpp"
#include "gantt_view.hpp"
#include "inputs_panel.hpp"
#include "memory_chart.hpp"
#include "scatter_chart.hpp"
#include "units.hpp"

namespace shardplan::gui {

MainWindow::MainWindow(std::unique_ptr<QSettings> settings, QWidget* parent)
    : QMainWindow(parent),
      settings_(settings ? std::move(settings) : std::make_unique<QSettings>("shardplan", "shardplan-gui")) {
  setWindowTitle("shardplan — distributed training planner");
  model_ = new CandidatesModel(this);
  proxy_ = new CandidateFilter(this);
  proxy_->setSourceModel(model_);
  worker_ = new SearchWorker(this);
  connect(worker_, &SearchWorker::candidatesFound, this, &MainWindow::onCandidates);
  connect(worker_, &SearchWorker::progressed, this, &MainWindow::onProgress);
  connect(worker_, &SearchWorker::finished, this, &MainWindow::onFinished);

  inputs_ = new InputsPanel;
  auto* scroll = new QScrollArea;
  scroll->setWidget(inputs_);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(250);
  main_split_ = new QSplitter(Qt::Horizontal);
  main_split_->addWidget(scroll);
  main_split_->addWidget(buildCentre());
  main_split_->setStretchFactor(1, 1);
  main_split_->setSizes({300, 980});
  setCentralWidget(main_split_);
  buildActions();
  connect(inputs_, &InputsPanel::validityChanged, this, &MainWindow::updateRunEnabled);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &MainWindow::onCurrentChanged);
  connect(scatter_, &ScatterChart::rowClicked, this, &MainWindow::selectSourceRow);
  restoreSession();
  updateRunEnabled();
  resize(1280, 800);
}

MainWindow::~MainWindow() {
  // Stop and join the search before the widgets its signals update go away.
  delete worker_;
  worker_ = nullptr;
}

void MainWindow::buildActions() {
  auto* file = menuBar()->addMenu("&File");
  auto* search = menuBar()->addMenu("&Search");
  auto* view = menuBar()->addMenu("&View");
  auto* tools = addToolBar("Search");
  tools->setObjectName("search_toolbar");
  run_ = search->addAction("&Run search", this, &MainWindow::runSearch);
  run_->setShortcuts({QKeySequence("Ctrl+R"), QKeySequence(Qt::Key_F5)});
  cancel_ = search->addAction("&Cancel", this, &MainWindow::cancelSearch);
  cancel_->setShortcut(QKeySequence(Qt::Key_Escape));
  cancel_->setEnabled(false);
  export_ = file->addAction("&Export selected plan…", this, &MainWindow::exportSelected);
  export_->setShortcut(QKeySequence("Ctrl+E"));
  file->addAction("&Open plan.json…", QKeySequence::Open, this, &MainWindow::openPlanDialog);
  file->addAction("Open shardrun &report.json…", QKeySequence("Ctrl+Shift+O"), this, &MainWindow::openReportDialog);
  file->addAction("&Save session", QKeySequence::Save, this, &MainWindow::saveSession);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
  compare_ = view->addAction("&Compare selected", this, &MainWindow::compareSelected);
  compare_->setShortcut(QKeySequence("Ctrl+D"));
  view->addAction("&Filter candidates", QKeySequence::Find, filter_edit_, [this] { filter_edit_->setFocus(); });
  view->addAction("Focus &table", QKeySequence("Ctrl+T"), table_, [this] { table_->setFocus(); });
  view->addAction("Focus &inputs", QKeySequence("Ctrl+I"), inputs_, [this] { inputs_->editor("model")->setFocus(); });
  for (int i = 0; i < 3; ++i)
    view->addAction(QString("Chart %1").arg(i + 1), QKeySequence(QString("Alt+%1").arg(i + 1)), chart_tabs_,
                    [this, i] { chart_tabs_->setCurrentIndex(i); });
  tools->addAction(run_);
  tools->addAction(cancel_);
  progress_ = new QProgressBar;
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setFormat("%p%");
  progress_->setMaximumWidth(220);
  tools->addWidget(progress_);
  tools->addSeparator();
  tools->addAction(export_);
  tools->addAction(compare_);
  status_ = new QLabel("Ready");
  statusBar()->addWidget(status_, 1);
}

QWidget* MainWindow::buildTablePane() {
  auto* pane = new QWidget;
  auto* v = new QVBoxLayout(pane);
  v->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  filter_edit_ = new QLineEdit;
  filter_edit_->setObjectName("filter");
  filter_edit_->setPlaceholderText("Filter (Ctrl+F): e.g. tp=8 zero=1 best");
  filter_edit_->setClearButtonEnabled(true);
  feasible_only_ = new QCheckBox("&Fits only");
  pareto_only_ = new QCheckBox("Pareto onl&y");
  bar->addWidget(filter_edit_, 1);
  bar->addWidget(feasible_only_);
  bar->addWidget(pareto_only_);
  v->addLayout(bar);
  connect(filter_edit_, &QLineEdit::textChanged, proxy_, &CandidateFilter::setText);
  connect(feasible_only_, &QCheckBox::toggled, proxy_, &CandidateFilter::setFeasibleOnly);
  connect(pareto_only_, &QCheckBox::toggled, proxy_, &CandidateFilter::setParetoOnly);
  table_ = new QTableView;
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(CandidatesModel::kRank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  v->addWidget(table_, 1);
  return pane;
}

QWidget* MainWindow::buildCentre() {
  right_split_ = new QSplitter(Qt::Vertical);
  right_split_->addWidget(buildTablePane());
  auto* bottom = new QSplitter(Qt::Horizontal);
  chart_tabs_ = new QTabWidget;
  memory_ = new MemoryChart;
  breakdown_ = new BreakdownChart;
  gantt_ = new GanttView;
  chart_tabs_->addTab(memory_, "&Memory");
  chart_tabs_->addTab(breakdown_, "Step &time");
  chart_tabs_->addTab(gantt_, "&Pipeline");
  auto* side = new QTabWidget;
  auto* scatter_pane = new QWidget;
  auto* sv = new QVBoxLayout(scatter_pane);
  sv->setContentsMargins(0, 0, 0, 0);
  scatter_mode_ = new QComboBox;
  scatter_mode_->addItems({"Time vs cost to train", "Throughput vs memory"});
  scatter_ = new ScatterChart;
  sv->addWidget(scatter_mode_);
  sv->addWidget(scatter_, 1);
  connect(scatter_mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
    scatter_->setMode(i == 1 ? ScatterChart::Mode::throughput_vs_memory : ScatterChart::Mode::time_vs_cost);
    scatter_->setSelectedRow(selectedSourceRow());
  });
  details_ = new QTextBrowser;
  details_->setObjectName("details");
  details_->setOpenLinks(false);
  side->addTab(scatter_pane, "Sc&atter");
  side->addTab(details_, "&Details / why not");
  bottom->addWidget(chart_tabs_);
  bottom->addWidget(side);
  bottom->setSizes({490, 490});
  right_split_->addWidget(bottom);
  right_split_->setStretchFactor(0, 2);
  right_split_->setStretchFactor(1, 3);
  return right_split_;
}

void MainWindow::setStatus(const QString& text) { status_->setText(text); }

QString MainWindow::statusText() const { return status_->text(); }

QString MainWindow::detailsText() const { return details_->toPlainText(); }

void MainWindow::updateRunEnabled() {
  const bool ok = inputs_->valid();
  run_->setEnabled(ok && worker_ && !worker_->isRunning());
  run_->setToolTip(ok ? "Run the search (Ctrl+R)" : "Fix the inputs marked in red first");
}

void MainWindow::setRunning(bool running) {
  cancel_->setEnabled(running);
  inputs_->setEnabled(!running);
  updateRunEnabled();
  if (running) run_->setEnabled(false);
}

void MainWindow::runSearch() {
  if (!inputs_->valid() || worker_->isRunning()) return;
  const auto& resolved = *inputs_->validation().resolved;
  running_model_ = std::make_shared<const simulator::ModelSpec>(resolved.model);
  model_->clear();
  scatter_->setRows({}, 0);
  updateDetails(-1);
  progress_->setValue(0);
  if (!worker_->start(resolved)) return;
  setRunning(true);
  setStatus(QString("Searching %1 on %2 …")
                .arg(QString::fromStdString(resolved.model.name), QString::fromStdString(resolved.hardware.name)));
}

void MainWindow::cancelSearch() {
  if (!worker_->isRunning()) return;
  worker_->cancel();
  setStatus("Cancelling …");
}

void MainWindow::onCandidates(const CandidateBatch& batch) { model_->appendStreamed(batch, running_model_); }

void MainWindow::onProgress(int permille, qlonglong considered) {
  progress_->setValue(permille);
  setStatus(QString("Searching … %1 configurations considered").arg(format_count(static_cast<double>(considered))));
}

void MainWindow::onFinished(const OutcomePtr& outcome) {
  outcome_ = outcome;
  setRunning(false);
  if (!outcome->error.isEmpty()) {
    setStatus("Search failed: " + outcome->error);
    emit searchFinished();
    return;
  }
  const auto& r = outcome->result;
  model_->setRows(outcome->rows);
  scatter_->setRows(model_->rows(), outcome->request.options.train_tokens);
  progress_->setValue(outcome->cancelled ? progress_->value() : 1000);
  QString s = QString("%1 configurations (%2 evaluated, %3 pruned) in %4; %5 fit and are ranked")
                  .arg(format_count(static_cast<double>(r.considered)), format_count(static_cast<double>(r.evaluated)),
                       format_count(static_cast<double>(r.pruned + r.outranked)), format_seconds(r.seconds))
                  .arg(r.ranked.size());
  if (outcome->cancelled) s = "Cancelled — best so far: " + s;
  if (r.ranked.empty()) s += " — nothing fits; see Details / why not";
  setStatus(s);
  if (!model_->rows().empty()) selectSourceRow(0);
  else updateDetails(-1);
  saveSession();
  emit searchFinished();
}

void MainWindow::selectSourceRow(int source_row) {
  if (source_row < 0 || source_row >= model_->rowCount()) return;
  QModelIndex idx = proxy_->mapFromSource(model_->index(source_row, 0));
  if (!idx.isValid()) {  // hidden by the filter: clear it so the row can be shown
    filter_edit_->clear();
    feasible_only_->setChecked(false);
    pareto_only_->setChecked(false);
    idx = proxy_->mapFromSource(model_->index(source_row, 0));
  }
  table_->selectionModel()->setCurrentIndex(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(idx);
}

int MainWindow::selectedSourceRow() const {
  const QModelIndex cur = table_->selectionModel()->currentIndex();
  return cur.isValid() ? proxy_->mapToSource(cur).row() : -1;
}

void MainWindow::onCurrentChanged() {
  const int row = selectedSourceRow();
  const CandidateRow* r = row >= 0 ? &model_->row(row) : nullptr;
  const simulator::Prediction* p = r && r->prediction ? r->prediction.get() : nullptr;
  memory_->showPrediction(
      p, measured_ ? std::optional<double>(static_cast<double>(measured_->measured.peak_bytes)) : std::nullopt);
  breakdown_->showPrediction(p, measured_ ? &measured_->measured : nullptr);
  gantt_->setSchedule(p ? &p->pipeline : nullptr, p ? static_cast<int>(p->stages.size()) : 0,
                      r ? "Pipeline schedule: " + QString::fromStdString(r->candidate.key) : QString());
  scatter_->setSelectedRow(row);
  export_->setEnabled(p && p->feasible);
  updateDetails(row);
}

}  // namespace shardplan::gui
