// The candidates model under QAbstractItemModelTester, the filter proxy, sorting, the Pareto
// front and the session store.
#include <QAbstractItemModelTester>
#include <QTest>

#include "candidate_filter.hpp"
#include "candidates_model.hpp"
#include "gui_test_support.hpp"
#include "pareto.hpp"
#include "session_store.hpp"

namespace shardplan::gui::testing {

namespace {

// The outcome of a small search, computed directly (no window).
OutcomePtr small_outcome() {
  const auto v = validate(small_request());
  auto out = std::make_shared<SearchOutcome>();
  out->request = *v.resolved;
  std::vector<planner::Candidate> streamed;
  planner::SearchOptions o = out->request.options;
  o.on_block = [&streamed](const planner::SearchProgress& p) {
    if (p.candidate) streamed.push_back(*p.candidate);
  };
  out->result =
      planner::search(out->request.model, out->request.hardware, out->request.space, out->request.constraints, o);
  out->rows = rows_of(out->result, streamed, out->request, nullptr);
  return out;
}

}  // namespace

class ModelTest : public QObject {
  Q_OBJECT
 private slots:
  void modelTesterOnEveryChange() {
    CandidatesModel model;
    CandidateFilter proxy;
    proxy.setSourceModel(&model);
    QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const OutcomePtr out = small_outcome();
    QVERIFY(out->rows.size() > 5);
    auto spec = std::make_shared<const simulator::ModelSpec>(out->request.model);
    CandidateBatch batch;
    for (std::size_t i = 0; i < 5; ++i) batch.push_back(out->rows[i].candidate);
    model.appendStreamed(batch, spec);
    model.appendStreamed(batch, spec);
    QCOMPARE(model.rowCount(), 10);
    proxy.sort(CandidatesModel::kTokensPerS, Qt::DescendingOrder);
    model.setRows(out->rows);
    QCOMPARE(model.rowCount(), static_cast<int>(out->rows.size()));
    proxy.setText("tp=2");
    proxy.setFeasibleOnly(true);
    proxy.setParetoOnly(true);
    proxy.setParetoOnly(false);
    model.addRow(out->rows.front());
    proxy.setText({});
    model.clear();
    QCOMPARE(proxy.rowCount(), 0);
  }

  void filterAndSort() {
    CandidatesModel model;
    CandidateFilter proxy;
    proxy.setSourceModel(&model);
    model.setRows(small_outcome()->rows);
    proxy.setText("tp=2 zero=1");
    QVERIFY(proxy.rowCount() > 0);
    QVERIFY(proxy.rowCount() < model.rowCount());
    for (int i = 0; i < proxy.rowCount(); ++i) {
      const auto& r = model.row(proxy.mapToSource(proxy.index(i, 0)).row());
      QCOMPARE(r.candidate.config.tp, 2);
      QCOMPARE(r.candidate.config.zero_stage, 1);
    }
    proxy.setText({});
    proxy.setFeasibleOnly(true);
    for (int i = 0; i < proxy.rowCount(); ++i)
      QVERIFY(model.row(proxy.mapToSource(proxy.index(i, 0)).row()).feasible());
    proxy.sort(CandidatesModel::kTokensPerS, Qt::DescendingOrder);
    for (int i = 1; i < proxy.rowCount(); ++i)
      QVERIFY(proxy.index(i - 1, CandidatesModel::kTokensPerS).data(CandidatesModel::kSortRole).toDouble() >=
              proxy.index(i, CandidatesModel::kTokensPerS).data(CandidatesModel::kSortRole).toDouble());
    // Display text carries units.
    QVERIFY(proxy.index(0, CandidatesModel::kMemory).data().toString().endsWith("GiB"));
    QVERIFY(proxy.index(0, CandidatesModel::kUsdPerHour).data().toString().startsWith("$"));
  }

  void paretoFront() {
    const std::vector<PlotPoint> pts{{0, 1, 5}, {1, 2, 3}, {2, 3, 4}, {3, 4, 1}, {4, 2, 3.5}, {5, 5, 1}};
    const std::vector<int> front = pareto_front(pts);
    QCOMPARE(front, (std::vector<int>{0, 1, 3}));
    QVERIFY(pareto_front({}).empty());
  }

  void sessionIsRestored() {
    shardplan::testing::TempDir dir("shardplan_gui_session");
    const QString file = QString::fromStdString(dir.file("s.ini"));
    PlanRequest req = small_request();
    req.model = "gpt2";
    req.lora_rank = "4";
    req.lora_targets = "c_attn";
    req.nodes = "1-4";
    req.objective = "cost";
    req.max_usd_per_hour = "500";
    {
      MainWindow w(std::make_unique<QSettings>(file, QSettings::IniFormat));
      w.inputs()->setRequest(req);
      w.setScatterMode(1);
      w.saveSession();
    }
    MainWindow again(std::make_unique<QSettings>(file, QSettings::IniFormat));
    QVERIFY(again.inputs()->request() == req);
    QSettings raw(file, QSettings::IniFormat);
    QCOMPARE(load_session(raw).scatter_mode, 1);
    QCOMPARE(request_from_json(to_json(req)), req);
  }
};

}  // namespace shardplan::gui::testing

QObject* make_model_test() { return new shardplan::gui::testing::ModelTest; }

#include "test_model.moc"
