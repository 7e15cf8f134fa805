// shardplan-gui: the desktop planner. Flags load inputs (as `shardplan plan` names them), run
// the search and grab the window to a PNG (the README screenshot).
#include <QApplication>
#include <QCommandLineParser>
#include <QSettings>
#include <QTimer>
#include <cstdio>

#include "inputs_panel.hpp"
#include "main_window.hpp"

namespace {

struct Flag {
  const char* name;
  std::string shardplan::gui::PlanRequest::*member;
};

const Flag kFlags[] = {{"model", &shardplan::gui::PlanRequest::model},
                       {"hardware", &shardplan::gui::PlanRequest::hardware},
                       {"nodes", &shardplan::gui::PlanRequest::nodes},
                       {"global-batch-size", &shardplan::gui::PlanRequest::global_batch},
                       {"seq-len", &shardplan::gui::PlanRequest::seq_len},
                       {"precision", &shardplan::gui::PlanRequest::precision},
                       {"mixed-precision", &shardplan::gui::PlanRequest::mixed_precision},
                       {"attention", &shardplan::gui::PlanRequest::attention},
                       {"fusion", &shardplan::gui::PlanRequest::fusion},
                       {"grad_accum_dtype", &shardplan::gui::PlanRequest::grad_accum_dtype},
                       {"packed-document-tokens", &shardplan::gui::PlanRequest::packed_document_tokens},
                       {"fp8", &shardplan::gui::PlanRequest::fp8},
                       {"cp", &shardplan::gui::PlanRequest::cp},
                       {"cp-kind", &shardplan::gui::PlanRequest::cp_kind},
                       {"ep", &shardplan::gui::PlanRequest::ep},
                       {"lora-rank", &shardplan::gui::PlanRequest::lora_rank},
                       {"lora-alpha", &shardplan::gui::PlanRequest::lora_alpha},
                       {"lora-dropout", &shardplan::gui::PlanRequest::lora_dropout},
                       {"lora-targets", &shardplan::gui::PlanRequest::lora_targets},
                       {"lora-base", &shardplan::gui::PlanRequest::lora_base},
                       {"train-tokens", &shardplan::gui::PlanRequest::train_tokens},
                       {"dataset-tokens", &shardplan::gui::PlanRequest::dataset_tokens},
                       {"epochs", &shardplan::gui::PlanRequest::epochs},
                       {"objective", &shardplan::gui::PlanRequest::objective},
                       {"max-usd-per-hour", &shardplan::gui::PlanRequest::max_usd_per_hour}};

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("shardplan-gui");
  QApplication::setOrganizationName("shardplan");
  QCommandLineParser cli;
  cli.setApplicationDescription("shardplan desktop planner");
  cli.addHelpOption();
  for (const Flag& f : kFlags) cli.addOption({f.name, QString("Input, as `shardplan plan --%1`").arg(f.name), "value"});
  cli.addOption({"settings", "Keep the session in this INI file instead of the user's settings", "file"});
  cli.addOption({"run", "Run the search at start"});
  cli.addOption({"screenshot", "Run the search, select the best row, save the window as PNG and quit", "png"});
  cli.addOption({"size", "Window size WxH", "size", "1280x800"});
  cli.addOption({"scatter", "Scatter axes: time-cost or throughput-memory", "axes"});
  cli.process(app);

  std::unique_ptr<QSettings> settings;
  if (cli.isSet("settings")) settings = std::make_unique<QSettings>(cli.value("settings"), QSettings::IniFormat);
  shardplan::gui::MainWindow w(std::move(settings));
  shardplan::gui::PlanRequest req = w.inputs()->request();
  for (const Flag& f : kFlags)
    if (cli.isSet(f.name)) req.*f.member = cli.value(f.name).toStdString();
  w.inputs()->setRequest(req);
  if (cli.isSet("scatter")) w.setScatterMode(cli.value("scatter") == "throughput-memory" ? 1 : 0);
  const QStringList size = cli.value("size").split('x');
  if (size.size() == 2) w.resize(size[0].toInt(), size[1].toInt());
  w.show();

  const QString shot = cli.value("screenshot");
  if (!shot.isEmpty()) {
    QObject::connect(&w, &shardplan::gui::MainWindow::searchFinished, &w, [&w, shot] {
      QTimer::singleShot(200, &w, [&w, shot] {
        const bool ok = w.grab().save(shot, "PNG");
        std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "wrote" : "cannot write", qPrintable(shot));
        QApplication::exit(ok ? 0 : 1);
      });
    });
  }
  if (cli.isSet("run") || !shot.isEmpty()) {
    if (!w.inputs()->valid()) {
      for (const auto& [field, why] : w.inputs()->validation().errors) std::fprintf(stderr, "%s\n", why.c_str());
      return 2;
    }
    QTimer::singleShot(0, &w, &shardplan::gui::MainWindow::runSearch);
  }
  return app.exec();
}
