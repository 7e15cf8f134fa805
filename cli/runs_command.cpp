// `shardplan runs import LOG --format F`: a training log of another stack (or shardrun's own
// metrics.jsonl) plus the layout it ran (the simulate flags, or --import of its config file) into
// one run of a `shardplan.runs/1` file, which `validate --runs` and `calibrate --runs` take.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "calibration/run_comparison.hpp"
#include "calibration/runs_file.hpp"
#include "commands.hpp"
#include "frameworks/registry.hpp"
#include "interop/training_log.hpp"
#include "layout_options.hpp"
#include "report.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;
namespace cal = shardplan::calibration;
namespace fs = std::filesystem;

namespace {

struct RunsImportOptions {
  LayoutOptions layout;
  std::string log, format, out, name, source = "my-cluster", citation, note;
  std::optional<int> skip_steps;
  bool append = false, no_memory = false;
};

void add_import_options(CLI::App* cmd, RunsImportOptions& o) {
  cmd->add_option("log", o.log, "The training log (shardrun: its metrics.jsonl)")->required();
  std::string formats;
  for (const auto& f : interop::log_format_names()) formats += (formats.empty() ? "" : ", ") + f;
  cmd->add_option("--format", o.format, "Log format: " + formats)
      ->required()
      ->check(CLI::IsMember(interop::log_format_names()));
  cmd->add_option("--out", o.out, "Runs file to write (shardplan.runs/1)")->required();
  cmd->add_flag("--append", o.append, "Add the run to an existing runs file");
  cmd->add_option("--name", o.name, "Run name (default: the log's file name)");
  cmd->add_option("--source", o.source, "Source id runs are grouped by in validate / leave-one-source-out");
  cmd->add_option("--citation", o.citation, "Where the run comes from (default: the log's path and format)");
  cmd->add_option("--note", o.note, "Free text kept with the run");
  cmd->add_option("--skip-steps", o.skip_steps,
                  "Logged iterations left out as warm-up (default: 1 when more than 2 are logged)");
  cmd->add_flag("--no-memory", o.no_memory, "Leave the log's peak-memory figure out of the run");
  add_layout_options(cmd, o.layout);
}

// The model as the runs file keeps it: a built-in name, or the card / config.json inline.
nlohmann::json model_entry(const std::string& model) {
  if (fs::is_regular_file(model)) return sim::read_json_file(model);
  return model;
}

nlohmann::json run_entry(const RunsImportOptions& o, const Layout& l, const interop::MeasuredFigure& m) {
  nlohmann::json hardware{{"profile", o.layout.hardware}, {"nodes", o.layout.nodes}};
  if (o.layout.devices_per_node > 0) hardware["devices_per_node"] = o.layout.devices_per_node;
  nlohmann::json measured{{m.key, m.value}};
  if (m.peak_bytes && !o.no_memory) measured["peak_memory_GiB"] = *m.peak_bytes / kGiB;
  std::string note = "imported by `shardplan runs import` from " + o.log + " (" + o.format + "): " + m.how;
  if (m.peak_bytes && !o.no_memory) note += "; peak memory: the log's largest figure";
  if (!o.note.empty()) note += "; " + o.note;
  nlohmann::json run{
      {"name", o.name.empty() ? fs::path(o.log).stem().string() : o.name},
      {"source", o.source},
      {"citation", o.citation.empty() ? "training log " + o.log + " (" + o.format + " format)" : o.citation},
      {"model", model_entry(o.layout.model)},
      {"hardware", hardware},
      {"config", sim::to_json(l.config)},
      {"measured", measured},
      {"note", note}};
  if (l.framework) run["framework"] = frameworks::framework_ref_json(*l.framework);
  return run;
}

int run_import(const RunsImportOptions& o) {
  const Layout layout = resolve_layout(o.layout);
  const interop::TrainingLog log = interop::load_training_log(o.log, *interop::log_format_from_string(o.format));
  const interop::MeasuredFigure m = interop::measured_figure(log, o.skip_steps);
  const nlohmann::json run = run_entry(o, layout, m);
  const cal::RunsFile file =
      cal::add_run_to_file(o.out, run, o.append, "runs imported from training logs by `shardplan runs import`");
  const cal::RecordedRun& added = file.runs.back();
  const cal::RunComparison c = cal::compare_run(added, added.plan.cluster.hardware);
  std::printf("%s: %s = %.6g (%s)\n", o.log.c_str(), m.key.c_str(), m.value, m.how.c_str());
  std::printf("run '%s' written to %s (%zu run(s)): measured %.0f tokens/s, predicted %.0f tokens/s (%+.1f%%)\n",
              added.name.c_str(), o.out.c_str(), file.runs.size(), c.measured_tokens_per_s, c.predicted_tokens_per_s,
              100.0 * c.throughput_error());
  return 0;
}

}  // namespace

Run add_runs_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("runs", "Measured-run files (shardplan.runs/1): import a training log");
  cmd->require_subcommand(1);
  auto* import_cmd = cmd->add_subcommand(
      "import",
      "Turn a training log (Megatron, torchtitan, DeepSpeed, HF Trainer, Optimum-Habana, shardrun) and the "
      "layout it ran into a run of a shardplan.runs/1 file");
  auto o = std::make_shared<RunsImportOptions>();
  add_import_options(import_cmd, *o);
  return [o, import_cmd]() {
    if (import_cmd->parsed()) return run_import(*o);
    return 2;
  };
}

}  // namespace shardplan::cli
