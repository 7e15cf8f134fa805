// Export writes what the CLI writes for the same configuration; plan.json and report.json open;
// compare shows the candidates side by side.
#include <QTableWidget>
#include <QTest>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "breakdown_chart.hpp"
#include "candidates_model.hpp"
#include "compare_dialog.hpp"
#include "gui_test_support.hpp"
#include "memory_chart.hpp"
#include "support/run_command.hpp"

namespace shardplan::gui::testing {

namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> read_dir(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    files[e.path().filename().string()] = s.str();
  }
  return files;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

PlanRequest lora_request() {
  PlanRequest r = small_request();
  r.lora_rank = "8";
  r.lora_targets = "q_proj,v_proj";
  r.objective = "time";
  r.nodes = "1-2";
  r.mixed_precision = "autocast";  // fp32 weights: a different memory model, both sides must carry it
  r.attention = "eager";           // s x s scores stored: likewise
  r.fusion = "megatron";           // fused projections and SwiGLU: likewise
  return r;
}

}  // namespace

class ExportTest : public QObject {
  Q_OBJECT
 private slots:
  void exportIsByteIdenticalToTheCli() {
    const PlanRequest req = lora_request();
    Harness h(req);
    QVERIFY(h.search());
    const fs::path out = h.dir.path() / "launch";
    const std::string plan = (out / "plan.json").string();
    fs::create_directories(out);
    std::string cmd = SHARDPLAN_BINARY;
    for (const auto& a : cli_arguments(req)) cmd += " " + quoted(a);
    auto r = shardplan::testing::run_command(cmd + " --quiet --out " + quoted(plan));
    QVERIFY2(r.status == 0, r.out.c_str());
    r = shardplan::testing::run_command(std::string(SHARDPLAN_BINARY) + " export " + quoted(plan) + " --out-dir " +
                                        quoted(out.string()));
    QVERIFY2(r.status == 0, r.out.c_str());
    const auto cli = read_dir(out);
    // plan.json, the shardrun launchers, NOTES.txt and every framework's files that can run the plan
    for (const char* name :
         {"plan.json", "launch_mpirun.sh", "launch_slurm.sbatch", "ds_config.json", "megatron_args.sh", "NOTES.txt"})
      QVERIFY2(cli.count(name), name);
    fs::remove_all(out);

    QVERIFY(h.window->exportRow(0, QString::fromStdString(plan)));
    const auto gui = read_dir(out);
    QCOMPARE(gui.size(), cli.size());
    for (const auto& [name, bytes] : cli) {
      QVERIFY2(gui.count(name), name.c_str());
      QVERIFY2(gui.at(name) == bytes, ("differs from the CLI's: " + name).c_str());
    }
  }

  void openedPlanBecomesASelectedRow() {
    Harness h;
    QVERIFY(h.search());
    const std::string plan = h.dir.file("p/plan.json");
    QVERIFY(h.window->exportRow(1, QString::fromStdString(plan)));
    const int before = h.window->candidates()->rowCount();
    QVERIFY(h.window->openPlan(QString::fromStdString(plan)));
    QCOMPARE(h.window->candidates()->rowCount(), before + 1);
    QCOMPARE(h.window->selectedSourceRow(), before);
    const auto& opened = h.window->candidates()->row(before);
    QVERIFY(opened.origin == Origin::opened);
    QCOMPARE(opened.candidate.key, h.window->candidates()->row(1).candidate.key);
    QCOMPARE(h.window->memoryChart()->stageCount(), opened.candidate.config.pp);
    // A broken plan: one line naming the file, nothing added.
    std::ofstream(plan) << R"({"schema": "shardplan.plan/1"})";
    QVERIFY(!h.window->openPlan(QString::fromStdString(plan)));
    QVERIFY2(h.window->statusText().contains(QString::fromStdString(plan)), qPrintable(h.window->statusText()));
    QCOMPARE(h.window->candidates()->rowCount(), before + 1);
  }

  void reportOverlaysMeasuredOnPredicted() {
    Harness h;
    QVERIFY(h.search());
    const std::string report = h.dir.file("report.json");
    std::ofstream(report) << R"({"schema": "shardplan.report/1", "plan": "plan.json", "model": "tiny-llama",
      "world_size": 8, "measured": {"step_seconds": 0.5, "tokens_per_second": 16384, "compute_seconds": 0.4,
      "tp_comm_seconds": 0.05, "dp_comm_seconds": 0.03, "optimizer_seconds": 0.02,
      "peak_memory_bytes": 2.0e9, "peak_memory_bytes_per_rank": [2.0e9, 1.9e9]},
      "predicted": {"step_seconds": 0.45, "peak_memory_bytes": 1.8e9}})";
    QVERIFY(!h.window->breakdownChart()->hasMeasuredBar());
    QVERIFY(h.window->openReport(QString::fromStdString(report)));
    QVERIFY(h.window->breakdownChart()->hasMeasuredBar());
    QVERIFY(h.window->memoryChart()->hasMeasuredLine());
    QVERIFY(h.window->detailsText().contains("Measured"));
    std::ofstream(report) << R"({"schema": "shardplan.report/1", "measured": {"tokens_per_second": 1}})";
    QVERIFY(!h.window->openReport(QString::fromStdString(report)));
    const QString why = h.window->statusText();
    QVERIFY2(why.contains(QString::fromStdString(report)) && why.contains("measured.step_seconds"), qPrintable(why));
  }

  void compareShowsCandidatesSideBySide() {
    Harness h;
    QVERIFY(h.search());
    QVERIFY(h.window->candidates()->rowCount() >= 3);
    QVERIFY(h.window->compareRows({0}) == nullptr);  // needs two
    CompareDialog* dlg = h.window->compareRows({0, 1, 2});
    QVERIFY(dlg);
    QCOMPARE(dlg->table()->columnCount(), 3);
    QVERIFY(dlg->table()->rowCount() > 10);
    QCOMPARE(dlg->table()->item(0, 1)->text(),
             QString::fromStdString(h.window->candidates()->row(1).candidate.key).replace(' ', '\n'));
    // The best throughput (row 0 under the throughput objective) is bold.
    QVERIFY(dlg->table()->item(2, 0)->font().bold());
    dlg->close();
  }
};

}  // namespace shardplan::gui::testing

QObject* make_export_test() { return new shardplan::gui::testing::ExportTest; }

#include "test_export.moc"
