// `shardplan validate`: plan each configuration of a suite, train it for a few steps with the
// real `shardrun` under mpirun, and compare the measured step time and per-rank peak memory
// with the prediction (table, summary, --json results, --plot SVG).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "calibration/runs_file.hpp"
#include "calibration/validation.hpp"
#include "commands.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "validate_runs.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;
namespace cal = shardplan::calibration;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

// The runner's defaults (cal::RunnerOptions) are the command's: one place says how a run is run.
const cal::RunnerOptions kRunnerDefaults{};

struct ValidateOptions {
  std::string hardware = "local-cpu-2core", suite = "builtin", configs, only, out_dir = kRunnerDefaults.out_dir;
  std::string json, plot, shardrun, mpirun = kRunnerDefaults.mpirun, runs;
  int steps = kRunnerDefaults.steps, threads = kRunnerDefaults.threads, repeats = kRunnerDefaults.repeats,
      max_steps = kRunnerDefaults.max_steps;
  double timeout_s = kRunnerDefaults.timeout_s, min_measured_s = kRunnerDefaults.min_measured_s;
  bool list = false;
};

void add_options(CLI::App* cmd, ValidateOptions& o) {
  cmd->add_option("--hardware", o.hardware, "Built-in profile or profile JSON (measured profiles too)");
  auto* suite = cmd->add_option("--suite", o.suite,
                                "builtin (shardrun runs on this machine) or a shipped suite of recorded runs "
                                "(published: the public record, runs/published.json)");
  auto* configs =
      cmd->add_option("--configs", o.configs, "JSON array of configurations (same form as the built-in suite)")
          ->excludes(suite);
  cmd->add_option("--runs", o.runs, "Recorded runs (shardplan.runs/1): simulate each and compare, no shardrun")
      ->excludes(suite)
      ->excludes(configs);
  cmd->add_option("--only", o.only,
                  "Only these (comma-separated): configuration names; with --runs / --suite published also sources, "
                  "profiles or name prefixes ending in *");
  cmd->add_option("--steps", o.steps, "Training steps per run")->check(CLI::PositiveNumber);
  cmd->add_option("--min-measured-seconds", o.min_measured_s,
                  "More steps for fast configurations: enough that the steps in the median are predicted to last "
                  "this long (0 = exactly --steps)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-steps", o.max_steps, "At most this many steps per run from --min-measured-seconds")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o.threads, "Threads per rank")->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", o.repeats,
                  "Runs per configuration, in rounds over the whole suite (each configuration's runs minutes apart); "
                  "the step time compared is their median")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out-dir", o.out_dir, "One sub-directory per configuration: plan.json, output.log, report.json");
  cmd->add_option("--json", o.json, "Write the results (schema shardplan.validation/1) to this file");
  cmd->add_option("--plot", o.plot, "Write an SVG of predicted vs measured to this file");
  cmd->add_option("--shardrun", o.shardrun, "shardrun binary (default: ../executor/shardrun next to shardplan)");
  cmd->add_option("--mpirun", o.mpirun, "mpirun to launch shardrun with");
  cmd->add_option("--timeout", o.timeout_s, "Seconds one run may take before it is killed and counted failed")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--list", o.list, "Print the configurations and exit");
}

std::string find_shardrun(const std::string& given) {
  if (!given.empty()) {
    if (!fs::is_regular_file(given) || ::access(given.c_str(), X_OK) != 0)
      throw sim::InputError("--shardrun: '" + given + "' is not an executable file");
    return fs::absolute(given).string();
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path guess = ec ? fs::path() : (self.parent_path() / ".." / "executor" / "shardrun").lexically_normal();
  if (guess.empty() || ::access(guess.c_str(), X_OK) != 0)
    throw sim::InputError("--shardrun: not given, and no shardrun at '" + guess.string() +
                          "' (build the shardrun target or pass --shardrun PATH)");
  return guess.string();
}

std::string describe(const cal::ValidationEntry& e) {
  std::string s = e.model + ": tp " + std::to_string(e.tp) + ", pp " + std::to_string(e.pp) + ", dp " +
                  std::to_string(e.dp) + ", zero " + std::to_string(e.zero_stage);
  if (e.sharding_degree > 0) s += " (shard " + std::to_string(e.sharding_degree) + ")";
  s += ", mbs " + std::to_string(e.micro_batch_size) + ", gbs " + std::to_string(e.global_batch_size) + ", seq " +
       std::to_string(e.seq_len) + ", " + sim::to_string(e.precision);
  if (e.sequence_parallel) s += ", sp";
  if (e.recompute != sim::Recompute::none) s += std::string(", recompute ") + sim::to_string(e.recompute);
  if (e.pp > 1) s += std::string(", ") + sim::to_string(e.schedule);
  if (e.lora.enabled()) s += ", LoRA r" + std::to_string(e.lora.rank);
  return s;
}

void print_list(const std::vector<cal::ValidationEntry>& suite) {
  for (const auto& e : suite)
    std::printf("%-28s %d rank%s  %s\n", e.name.c_str(), e.ranks(), e.ranks() == 1 ? " " : "s", describe(e).c_str());
}

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / 1048576.0);
  return b;
}

std::string pct(double e) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f %%", 100 * e);
  return b;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The finished half of a progress line.
std::string outcome(const cal::ValidationRun& r) {
  if (r.status == cal::RunStatus::skipped) return "skipped: " + r.reason;
  if (r.status == cal::RunStatus::failed) return "FAILED: " + first_line(r.reason) + " (see " + r.output_log + ")";
  char b[96];
  const double last = r.measured_step_s_runs.empty() ? r.measured_step_s : r.measured_step_s_runs.back();  // this run's
  std::snprintf(b, sizeof b, "%.3f s/step over %d steps, %s", last, r.steps, mib(r.measured_peak_bytes).c_str());
  return b + (r.time_judged ? std::string() : " (" + r.time_note + ": time not judged)");
}

// `profile_ref_s` > 0 (a measured profile): a last column, how much slower the machine ran during
// each configuration's runs than when it was profiled (their reference GEMMs).
void print_table(const std::vector<cal::ValidationRun>& runs, int cores, double profile_ref_s) {
  const bool machine = profile_ref_s > 0;
  std::printf("\n%-28s %5s %10s %10s %10s %12s %12s %9s%s\n", "configuration", "ranks", "step pred", "step meas",
              "step err", "mem pred", "mem meas", "mem err", machine ? "   machine" : "");
  bool note = false;
  for (const auto& r : runs) {
    std::printf("%-28s %5d ", r.entry.name.c_str(), r.ranks);
    if (r.status != cal::RunStatus::ran) {
      std::printf("%s: %s\n", cal::to_string(r.status), first_line(r.reason).c_str());
      continue;
    }
    const std::size_t k = static_cast<std::size_t>(r.memory_error_rank);
    const double mp = k < r.predicted_peak_per_rank.size() ? r.predicted_peak_per_rank[k] : r.predicted_peak_bytes;
    const double mm = k < r.measured_peak_per_rank.size() ? r.measured_peak_per_rank[k] : r.measured_peak_bytes;
    const std::string te = r.time_judged ? pct(r.step_error) : "(" + pct(r.step_error) + ")*";
    note = note || !r.time_judged;
    const double slow = cal::machine_slowdown(r, profile_ref_s);
    char cell[24] = "";
    if (machine) std::snprintf(cell, sizeof cell, " %9s", std::isnan(slow) ? "-" : pct(slow).c_str());
    std::printf("%8.3f s %8.3f s %10s %12s %12s %9s%s\n", r.predicted_step_s, r.measured_step_s, te.c_str(),
                mib(mp).c_str(), mib(mm).c_str(), pct(r.memory_error).c_str(), cell);
  }
  if (note)
    std::printf("* oversubscribed (ranks x threads > %d cores): step time not judged, left out of the statistics\n",
                cores);
  if (machine)
    std::printf(
        "machine: the runs' reference GEMM (timed before the first step and after the last) against the "
        "profile's; + = the machine ran that much slower than when it was profiled\n");
}

void print_stats(const char* what, const cal::ValidationErrorStats& s) {
  if (s.count == 0) {
    std::printf("%-12s no runs\n", what);
    return;
  }
  std::printf("%-12s %2d run%s: mean |error| %.1f %%, median %.1f %%, worst %.1f %% (%s)\n", what, s.count,
              s.count == 1 ? " " : "s", 100 * s.mean_abs, 100 * s.median_abs, 100 * s.worst_abs, s.worst_run.c_str());
}

void prepare_parent(const std::string& path, const char* flag) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw sim::InputError(std::string(flag) + ": cannot create the directory '" + parent.string() + "'");
}

void write_outputs(const ValidateOptions& o, const cal::ValidationReport& report) {
  if (!o.json.empty()) {
    const std::string base = fs::path(o.json).parent_path().string();
    sim::write_file_atomically(o.json, cal::to_json(report, base).dump(2) + "\n");
    std::printf("results: %s\n", o.json.c_str());
  }
  if (!o.plot.empty()) {
    cal::write_svg_plot(report, o.plot);
    std::printf("plot: %s\n", o.plot.c_str());
  }
}

int run_validate(const ValidateOptions& o) {
  if (!o.runs.empty() || o.suite != "builtin") {
    RecordedValidateOptions r{o.runs.empty() ? cal::suite_path(o.suite) : o.runs, o.json, o.plot, o.only};
    if (!o.json.empty()) prepare_parent(o.json, "--json");
    if (!o.plot.empty()) prepare_parent(o.plot, "--plot");
    return run_validate_recorded(r);
  }
  const sim::HardwareProfile hw = sim::load_hardware(o.hardware);
  std::vector<cal::ValidationEntry> suite = o.configs.empty() ? cal::builtin_suite() : cal::load_suite_file(o.configs);
  if (!o.only.empty()) suite = cal::select_entries(suite, planner::split_list(o.only));
  if (o.list) {
    print_list(suite);
    return 0;
  }
  cal::RunnerOptions ro;
  ro.shardrun = find_shardrun(o.shardrun);
  ro.mpirun = o.mpirun;
  ro.out_dir = o.out_dir;
  ro.steps = o.steps;
  ro.min_measured_s = o.min_measured_s;
  ro.max_steps = o.max_steps;
  ro.threads = o.threads;
  ro.repeats = o.repeats;
  ro.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ro.timeout_s = o.timeout_s;
  ro.cancel = &g_stop;
  if (!o.json.empty()) prepare_parent(o.json, "--json");
  if (!o.plot.empty()) prepare_parent(o.plot, "--plot");
  cal::ValidationReport report{hw.name, o.hardware, o.steps, o.threads, ro.cores, o.repeats, {}};
  if (fs::is_regular_file(o.hardware))
    report.profile_reference_gemm_s = cal::profile_reference_gemm_seconds(sim::read_json_file(o.hardware));
  std::printf(
      "validating %zu configuration%s on %s (%d steps, more up to %d where the steps measured would last "
      "under %.1f s; %d thread%s per rank, %d cores%s)\n",
      suite.size(), suite.size() == 1 ? "" : "s", hw.name.c_str(), o.steps, o.max_steps, o.min_measured_s, o.threads,
      o.threads == 1 ? "" : "s", ro.cores,
      o.repeats > 1 ? (", median of " + std::to_string(o.repeats) + " runs each").c_str() : "");
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // Repeats in rounds over the whole suite (cal::prepare_entry): each entry's runs minutes apart.
  bool interrupted = false;
  const int rounds = std::max(1, o.repeats);
  std::vector<cal::ValidationRun> runs;
  for (const auto& e : suite) runs.push_back(cal::prepare_entry(e, hw, ro));
  for (int round = 1; round <= rounds && !interrupted; ++round)
    for (std::size_t i = 0; i < runs.size() && !interrupted; ++i) {
      cal::ValidationRun& run = runs[i];
      if (round > 1 && !cal::runnable(run)) continue;
      const std::string at = rounds > 1 ? "[round " + std::to_string(round) + "/" + std::to_string(rounds) + "] " : "";
      std::printf("%s[%zu/%zu] %s: %d rank%s ... ", at.c_str(), i + 1, suite.size(), run.entry.name.c_str(), run.ranks,
                  run.ranks == 1 ? "" : "s");
      std::fflush(stdout);
      if (cal::runnable(run) && (!cal::run_repeat(run, ro) || g_stop.load())) {
        interrupted = true;
        std::printf("interrupted\n");
        break;
      }
      std::printf("%s\n", outcome(run).c_str());
      std::fflush(stdout);
    }
  // An interrupted suite reports the entries that have a result (as before: those finished).
  for (auto& run : runs)
    if (!interrupted || run.has_measurement || !cal::runnable(run)) report.runs.push_back(std::move(run));
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  print_table(report.runs, ro.cores, report.profile_reference_gemm_s);
  const cal::ValidationSummary s = cal::summarize(report.runs);
  std::printf("\nran %d, skipped %d, failed %d (of %zu)\n", s.ran, s.skipped, s.failed, report.runs.size());
  print_stats("step time", s.step_seconds);
  print_stats("peak memory", s.peak_memory);
  write_outputs(o, report);
  if (interrupted) {
    std::printf("interrupted: %zu of %zu configurations finished\n", report.runs.size(), suite.size());
    return 130;
  }
  return s.failed > 0 ? 1 : 0;
}

}  // namespace

Run add_validate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Run configurations with shardrun and compare measured with predicted");
  auto o = std::make_shared<ValidateOptions>();
  add_options(cmd, *o);
  return [o]() { return run_validate(*o); };
}

}  // namespace shardplan::cli
