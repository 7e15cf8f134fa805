#pragma once
// MainWindow: inputs on the left; the candidates table (filterable, sortable) above; memory,
// step-time and pipeline charts and the scatter / details below. Search on a worker thread
// with progress and cancel; export, open plan / report, compare; session kept in QSettings.
#include <QMainWindow>
#include <QSettings>
#include <memory>
#include <optional>

#include "formats/run_report.hpp"
#include "search_worker.hpp"

class QAction;
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QSplitter;
class QTableView;
class QTabWidget;
class QTextBrowser;

namespace shardplan::gui {

class BreakdownChart;
class CandidateFilter;
class CandidatesModel;
class CompareDialog;
class GanttView;
class InputsPanel;
class MemoryChart;
class ScatterChart;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // `settings`: where the session lives (null = the user's QSettings for shardplan-gui).
  explicit MainWindow(std::unique_ptr<QSettings> settings = nullptr, QWidget* parent = nullptr);
  ~MainWindow() override;

  void runSearch();
  void cancelSearch();
  // Writes plan.json at `plan_path` and the launch files beside it; returns false (and shows
  // why in the status bar) when it cannot.
  bool exportRow(int source_row, const QString& plan_path);
  bool openPlan(const QString& path);
  bool openReport(const QString& path);
  CompareDialog* compareRows(const std::vector<int>& source_rows);
  void selectSourceRow(int source_row);
  [[nodiscard]] int selectedSourceRow() const;
  void saveSession();
  void setScatterMode(int index);  // 0 time vs cost, 1 throughput vs memory

  [[nodiscard]] InputsPanel* inputs() const { return inputs_; }
  [[nodiscard]] CandidatesModel* candidates() const { return model_; }
  [[nodiscard]] CandidateFilter* filter() const { return proxy_; }
  [[nodiscard]] QTableView* table() const { return table_; }
  [[nodiscard]] MemoryChart* memoryChart() const { return memory_; }
  [[nodiscard]] BreakdownChart* breakdownChart() const { return breakdown_; }
  [[nodiscard]] GanttView* gantt() const { return gantt_; }
  [[nodiscard]] ScatterChart* scatter() const { return scatter_; }
  [[nodiscard]] QString detailsText() const;
  [[nodiscard]] QAction* runAction() const { return run_; }
  [[nodiscard]] QAction* cancelAction() const { return cancel_; }
  [[nodiscard]] QProgressBar* progressBar() const { return progress_; }
  [[nodiscard]] SearchWorker* worker() const { return worker_; }
  [[nodiscard]] const OutcomePtr& lastOutcome() const { return outcome_; }
  [[nodiscard]] QString statusText() const;

 signals:
  void searchFinished();

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildActions();
  QWidget* buildCentre();
  QWidget* buildTablePane();
  void onCandidates(const CandidateBatch& batch);
  void onProgress(int permille, qlonglong considered);
  void onFinished(const OutcomePtr& outcome);
  void onCurrentChanged();
  void updateDetails(int source_row);
  void setRunning(bool running);
  void updateRunEnabled();
  void exportSelected();
  void openPlanDialog();
  void openReportDialog();
  void compareSelected();
  void restoreSession();
  void setStatus(const QString& text);

  std::unique_ptr<QSettings> settings_;
  InputsPanel* inputs_ = nullptr;
  CandidatesModel* model_ = nullptr;
  CandidateFilter* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* filter_edit_ = nullptr;
  QCheckBox* feasible_only_ = nullptr;
  QCheckBox* pareto_only_ = nullptr;
  MemoryChart* memory_ = nullptr;
  BreakdownChart* breakdown_ = nullptr;
  GanttView* gantt_ = nullptr;
  ScatterChart* scatter_ = nullptr;
  QComboBox* scatter_mode_ = nullptr;
  QTextBrowser* details_ = nullptr;
  QTabWidget* chart_tabs_ = nullptr;
  QSplitter* main_split_ = nullptr;
  QSplitter* right_split_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QAction *run_ = nullptr, *cancel_ = nullptr, *export_ = nullptr, *compare_ = nullptr;
  SearchWorker* worker_ = nullptr;
  OutcomePtr outcome_;
  std::shared_ptr<const simulator::ModelSpec> running_model_;
  std::optional<formats::RunReport> measured_;  // the shardrun report.json overlaid
  QString measured_path_;                       // its file
};

}  // namespace shardplan::gui
