#pragma once
// Helpers of the GUI tests: a main window with a throw-away session file and small searches.
#include <QSettings>
#include <QSignalSpy>
#include <QTest>
#include <memory>

#include "inputs_panel.hpp"
#include "main_window.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::gui::testing {

// tiny-llama on one p4d node: a search of a few thousand points, well under a second.
inline PlanRequest small_request() {
  PlanRequest r;
  r.model = "tiny-llama";
  r.hardware = "p4d.24xlarge";
  r.nodes = "1";
  r.global_batch = "16";
  r.seq_len = "512";
  r.train_tokens = "1e8";
  return r;
}

struct Harness {
  shardplan::testing::TempDir dir{"shardplan_gui"};
  std::unique_ptr<MainWindow> window;
  explicit Harness(const PlanRequest& r = small_request()) {
    window = std::make_unique<MainWindow>(std::make_unique<QSettings>(settings_file(), QSettings::IniFormat));
    window->inputs()->setRequest(r);
  }
  [[nodiscard]] QString settings_file() const { return QString::fromStdString(dir.file("session.ini")); }
  // Runs the search and waits for it (true when it finished in time).
  bool search(int timeout_ms = 60000) {
    QSignalSpy done(window.get(), &MainWindow::searchFinished);
    window->runSearch();
    return done.count() > 0 || done.wait(timeout_ms);
  }
};

}  // namespace shardplan::gui::testing
