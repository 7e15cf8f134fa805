// The search: runs on the worker thread, streams rows, fills the table, updates the charts on
// selection, the scatter selects rows, cancel stops the worker.
#include <QAction>
#include <QProgressBar>
#include <QTableView>
#include <QTest>
#include <cmath>

#include "breakdown_chart.hpp"
#include "candidate_filter.hpp"
#include "candidates_model.hpp"
#include "gantt_view.hpp"
#include "gui_test_support.hpp"
#include "memory_chart.hpp"
#include "scatter_chart.hpp"
#include "units.hpp"

namespace shardplan::gui::testing {

class SearchTest : public QObject {
  Q_OBJECT
 private slots:
  void runStreamsAndFillsTheTable() {
    Harness h;
    QStringList order;
    connect(h.window->worker(), &SearchWorker::candidatesFound, this, [&order] { order << "stream"; });
    connect(h.window.get(), &MainWindow::searchFinished, this, [&order] { order << "finished"; });
    QCOMPARE(h.window->candidates()->rowCount(), 0);
    h.window->runAction()->trigger();
    QVERIFY(h.window->worker()->isRunning() || !order.isEmpty());
    QVERIFY(!h.window->runAction()->isEnabled() || order.contains("finished"));
    QTRY_VERIFY_WITH_TIMEOUT(order.contains("finished"), 60000);
    QVERIFY2(order.first() == "stream", qPrintable(order.join(',')));  // rows arrived before the end
    const auto& outcome = h.window->lastOutcome();
    QVERIFY(outcome && outcome->error.isEmpty() && !outcome->cancelled);
    QVERIFY(!outcome->result.ranked.empty());
    QVERIFY(h.window->candidates()->rowCount() >= static_cast<int>(outcome->result.ranked.size()));
    QCOMPARE(h.window->filter()->rowCount(), h.window->candidates()->rowCount());
    QCOMPARE(h.window->progressBar()->value(), 1000);
    QVERIFY(h.window->runAction()->isEnabled());
    QVERIFY(!h.window->cancelAction()->isEnabled());
    // The best row comes first, is selected, and equals the planner's best.
    const CandidateRow& best = h.window->candidates()->row(0);
    QCOMPARE(best.rank, 1);
    QCOMPARE(best.candidate.key, outcome->result.ranked.front().candidate.key);
    QCOMPARE(h.window->selectedSourceRow(), 0);
    for (const auto& row : h.window->candidates()->rows()) QVERIFY(row.prediction);  // all simulated
  }

  void selectingARowUpdatesTheCharts() {
    Harness h;
    QVERIFY(h.search());
    auto* m = h.window->candidates();
    int piped = -1, flat = -1;
    for (int i = 0; i < m->rowCount(); ++i) {
      const auto& r = m->row(i);
      if (!r.prediction || !r.prediction->feasible) continue;
      if (r.candidate.config.pp > 1 && piped < 0) piped = i;
      if (r.candidate.config.pp == 1 && flat < 0) flat = i;
    }
    QVERIFY(piped >= 0 && flat >= 0);
    for (int row : {piped, flat}) {
      h.window->selectSourceRow(row);
      QCOMPARE(h.window->selectedSourceRow(), row);
      const simulator::Prediction& p = *m->row(row).prediction;
      QCOMPARE(h.window->memoryChart()->stageCount(), static_cast<int>(p.stages.size()));
      QCOMPARE(h.window->memoryChart()->capacityGiB(), p.device_capacity_bytes / kGiB);
      for (int s = 0; s < static_cast<int>(p.stages.size()); ++s) {
        double sum = 0;
        for (int k = 0; k < MemoryChart::kKindCount; ++k) sum += h.window->memoryChart()->value(k, s);
        QVERIFY(std::abs(sum - p.stages[static_cast<std::size_t>(s)].memory.total() / kGiB) < 1e-6);
      }
      double step = 0;
      for (const auto& part : h.window->breakdownChart()->parts()) step += part.second;
      QVERIFY(std::abs(step - p.time.step_s) <= 1e-9 * p.time.step_s);
      QCOMPARE(h.window->gantt()->eventCount(), static_cast<int>(p.pipeline.events.size()));
      QCOMPARE(h.window->gantt()->stageCount(), p.pipeline.events.empty() ? 0 : static_cast<int>(p.stages.size()));
      QVERIFY(h.window->detailsText().contains(QString::fromStdString(m->row(row).candidate.key)));
    }
    QVERIFY(h.window->gantt()->eventCount() > 0);
  }

  void clickingAScatterPointSelectsItsRow() {
    Harness h;
    h.window->show();
    QVERIFY(QTest::qWaitForWindowExposed(h.window.get()));
    QVERIFY(h.search());
    auto* scatter = h.window->scatter();
    // On one node cost is proportional to time, so time-vs-cost puts every candidate on one line
    // and candidates with equal step times on one pixel; throughput-vs-memory spreads them in 2-D.
    scatter->setMode(ScatterChart::Mode::throughput_vs_memory);
    QVERIFY(scatter->points().size() >= 2);
    QVERIFY(!scatter->frontRows().empty());
    // The point farthest from its neighbours on screen (a click cannot hit another one).
    int target = -1;
    double best_gap = 0;
    for (const auto& p : scatter->points()) {
      const QPoint at = scatter->positionOfRow(p.row);
      double gap = 1e9;
      for (const auto& q : scatter->points())
        if (q.row != p.row) gap = std::min(gap, QLineF(at, scatter->positionOfRow(q.row)).length());
      if (p.row != h.window->selectedSourceRow() && gap > best_gap) best_gap = gap, target = p.row;
    }
    QVERIFY(target >= 0 && best_gap > 4);
    QTest::mouseClick(scatter->viewport(), Qt::LeftButton, {}, scatter->positionOfRow(target));
    QTRY_COMPARE(h.window->selectedSourceRow(), target);
  }

  void cancelStopsTheWorker() {
    PlanRequest big;
    big.model = "gpt3-175b";
    big.hardware = "p4de.24xlarge";
    big.nodes = "8,16,32,64";
    big.global_batch = "1536";
    Harness h(big);
    QVERIFY(h.window->inputs()->valid());
    QSignalSpy done(h.window.get(), &MainWindow::searchFinished);
    h.window->runSearch();
    QVERIFY(h.window->worker()->isRunning());
    QVERIFY(h.window->cancelAction()->isEnabled());
    h.window->cancelAction()->trigger();
    QVERIFY(done.wait(60000));
    const auto& outcome = h.window->lastOutcome();
    QVERIFY(outcome->cancelled);
    QVERIFY(outcome->result.interrupted);
    QVERIFY(!h.window->worker()->isRunning());
    QVERIFY(h.window->runAction()->isEnabled());
    QVERIFY(h.window->statusText().startsWith("Cancelled"));
    // It stopped early: the whole space is larger than what it considered.
    const auto& req = *h.window->inputs()->validation().resolved;
    planner::SearchOptions opts = req.options;
    const auto full = planner::search(req.model, req.hardware, req.space, req.constraints, opts);
    QVERIFY2(outcome->result.considered < full.considered,
             qPrintable(QString("%1 vs %2").arg(outcome->result.considered).arg(full.considered)));
  }
};

}  // namespace shardplan::gui::testing

QObject* make_search_test() { return new shardplan::gui::testing::SearchTest; }

#include "test_search.moc"
