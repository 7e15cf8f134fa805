// `shardplan calibrate`: refit a hardware profile's efficiency / overhead terms to the measured
// step times of `shardplan validate --json` runs; write the calibrated profile and show the
// error before and after, on the fitting runs and on hold-out runs the fit never saw.
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "calibrate_frameworks.hpp"
#include "calibration/calibration.hpp"
#include "calibration/framework_fit.hpp"
#include "commands.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;

namespace {

struct CalibrateOptions {
  std::vector<std::string> runs;
  std::string hardware, out, holdout, fit, json, only, exclude, suite;
  bool loso = false, lofo = false, frameworks = false;
  int max_iterations = 100;
  double prior_sd = 0.10;
};

std::string line(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string percent(double relative) { return line("%+.1f%%", 100 * relative); }

sim::HardwareProfile base_profile(const CalibrateOptions& o, const calibration::MeasuredRuns& loaded) {
  if (!o.hardware.empty()) return sim::load_hardware(o.hardware);
  const std::string& hw = loaded.hardware_file;
  if (hw.empty()) throw sim::InputError("--hardware: expected the profile to calibrate (the runs name none)");
  if (sim::looks_like_path(hw) && !std::filesystem::is_regular_file(hw))
    throw sim::InputError("--runs: field 'hardware_file': expected an existing profile (no file '" + hw +
                          "'; give --hardware)");
  return sim::load_hardware(hw);
}

void print_parameters(std::ostream& out, const calibration::CalibrationResult& r) {
  out << line("%-18s %12s %12s %12s  %s\n", "parameter", "prior", "fitted", "std error", "identified");
  for (const auto& p : r.parameters) {
    const std::string se = p.std_error >= 0 ? line("%12.4g", p.std_error) : line("%12s", "-");
    const char* ident = !p.fitted ? "not fitted" : p.identified ? "yes" : "not identified";
    out << line("%-18s %12.4g %12.4g %s  %s\n", p.name.c_str(), p.prior, p.value, se.c_str(), ident);
  }
  if (!r.parameters.empty())
    out << line("%s: %d iterations, %s\n", "Levenberg-Marquardt on log step time", r.iterations,
                r.converged ? "converged" : "not converged");
}

void print_runs(std::ostream& out, const calibration::CalibrationResult& r) {
  out << line("\n%-28s %-8s %12s %12s %12s %10s %10s\n", "run", "set", "measured_s", "before_s", "after_s",
              "err_before", "err_after");
  for (const auto& run : r.runs)
    out << line("%-28s %-8s %12.5g %12.5g %12.5g %10s %10s\n", run.name.c_str(), run.holdout ? "holdout" : "fit",
                run.measured_s, run.before_s, run.after_s, percent(run.error_before()).c_str(),
                percent(run.error_after()).c_str());
  out << line("\n%-22s %5s %10s %10s %10s\n", "|relative error|", "runs", "mean", "median", "worst");
  auto row = [&](const char* label, const calibration::ErrorStats& s) {
    if (s.runs == 0) return;
    out << line("%-22s %5d %9.2f%% %9.2f%% %9.2f%%\n", label, s.runs, 100 * s.mean, 100 * s.median, 100 * s.worst);
  };
  row("fit, before", r.fit_before);
  row("fit, after", r.fit_after);
  row("hold-out, before", r.holdout_before);
  row("hold-out, after", r.holdout_after);
}

void print_loso(std::ostream& out, const std::vector<calibration::SourceHoldout>& rows, const char* unit = "source") {
  out << line("\nleave-one-%s-out (each %s predicted by a fit to the others; step-time error)\n", unit, unit);
  out << line("%-20s %5s %10s %10s %10s %10s %10s  %s\n", unit, "runs", "mean_bef", "mean_aft", "worst_aft", "bias_bef",
              "bias_aft", "fitted");
  double sum = 0;
  int n = 0;
  for (const auto& h : rows) {
    out << line("%-20s %5d %9.1f%% %9.1f%% %9.1f%% %+9.1f%% %+9.1f%%  %s\n", h.group.c_str(), h.runs,
                100 * h.before.mean, 100 * h.after.mean, 100 * h.after.worst, 100 * h.bias_before, 100 * h.bias_after,
                h.fitted ? "yes" : "no (too few other runs)");
    sum += h.after.mean;
    ++n;
  }
  if (n > 0)
    out << line("%-20s %5s %9s %9.1f%%\n", (std::string("mean over ") + unit + "s").c_str(), "", "", 100 * sum / n);
}

int run_calibrate(const CalibrateOptions& o) {
  std::vector<std::string> files = o.runs;
  if (!o.suite.empty()) files.push_back(calibration::suite_path(o.suite));
  if (files.empty()) throw sim::InputError("--runs: expected a runs file (or --suite published)");
  calibration::MeasuredRuns loaded = calibration::load_measured_runs(files);
  calibration::select_runs(loaded.runs, planner::split_list(o.only), planner::split_list(o.exclude));
  if (o.frameworks) {
    for (const auto& [flag, value] :
         {std::pair{"--fit", &o.fit}, {"--holdout", &o.holdout}, {"--hardware", &o.hardware}})
      if (!value->empty())
        throw sim::InputError(std::string(flag) +
                              ": not with --frameworks (it fits every profile's compute term and every framework's)");
    if (o.loso) throw sim::InputError("--leave-one-source-out: not with --frameworks (use --leave-one-framework-out)");
    return run_framework_fit(loaded.runs, {o.out, o.json, o.lofo, o.max_iterations, o.prior_sd});
  }
  const sim::HardwareProfile base = base_profile(o, loaded);
  calibration::CalibrationOptions opts;
  opts.parameters = planner::split_list(o.fit);
  opts.max_iterations = o.max_iterations;
  if (o.loso) {
    print_loso(std::cout, calibration::leave_one_source_out(base, loaded.runs, opts));
    std::cout << "\n";
  }
  if (o.lofo) {
    // The same protocol with each run's framework as its group.
    std::vector<calibration::MeasuredRun> by_framework = loaded.runs;
    for (auto& r : by_framework) r.group = r.framework.empty() ? "unnamed" : r.framework;
    print_loso(std::cout, calibration::leave_one_source_out(base, by_framework, opts), "framework");
    std::cout << "\n";
  }
  const std::string split_note = o.holdout == "none"
                                     ? std::string("no hold-out (--holdout none): every run is fitted")
                                     : calibration::assign_holdout(loaded.runs, planner::split_list(o.holdout),
                                                                   calibration::free_parameters(opts));
  calibration::CalibrationResult r = calibration::calibrate(base, loaded.runs, opts);
  if (!split_note.empty()) r.notes.insert(r.notes.begin(), split_note);
  for (const auto& ignored : loaded.ignored) r.notes.push_back("ignored run " + ignored);
  sim::write_file_atomically(o.out, calibration::calibrated_profile_json(r).dump(2) + "\n");
  if (!o.json.empty()) sim::write_file_atomically(o.json, calibration::to_json(r).dump(2) + "\n");

  std::ostream& out = std::cout;
  int fit = 0;
  for (const auto& run : r.runs) fit += run.holdout ? 0 : 1;
  out << line("calibrate %s from %zu runs (%d fit, %zu hold-out)\n\n", base.name.c_str(), r.runs.size(), fit,
              r.runs.size() - static_cast<std::size_t>(fit));
  print_parameters(out, r);
  print_runs(out, r);
  for (const auto& n : r.notes) out << "note: " << n << "\n";
  out << "\nwrote " << o.out << " (profile " << r.calibrated.name << ")";
  if (!o.json.empty()) out << " and " << o.json;
  out << "\n";
  return 0;
}

}  // namespace

Run add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Refit a hardware profile's compute/memory/communication/kernel-launch terms to measured runs");
  auto o = std::make_shared<CalibrateOptions>();
  cmd->add_option("--runs", o->runs,
                  "`shardplan validate --json` output or recorded runs (shardplan.runs/1); repeat to merge several");
  cmd->add_option("--suite", o->suite, "A shipped suite of recorded runs (published)");
  cmd->add_option("--only", o->only, "Fit only these runs, sources or profiles (comma-separated; name* = prefix)");
  cmd->add_option("--exclude", o->exclude,
                  "Leave these runs, sources or profiles out (comma-separated; name* = prefix)");
  cmd->add_flag("--leave-one-source-out", o->loso,
                "First print, for each source, its error when the fit sees only the other sources");
  cmd->add_flag("--leave-one-framework-out", o->lofo,
                "First print, for each framework the runs name, its error when the fit sees only the others' runs");
  cmd->add_flag("--frameworks", o->frameworks,
                "Fit each hardware family's compute term and each framework's compute_efficiency together (recorded "
                "runs naming their framework); --out gets the fit (shardplan.framework-fit/1)");
  cmd->add_option("--framework-prior-sd", o->prior_sd,
                  "With --frameworks: the prior's sd of ln(compute_efficiency) (default 0.10)")
      ->check(CLI::Range(0.001, 10.0));
  cmd->add_option("--hardware", o->hardware,
                  "Profile to calibrate: built-in name or JSON (default: the first runs file's hardware_file)");
  cmd->add_option("--out", o->out, "Write the calibrated profile here")->required();
  cmd->add_option("--holdout", o->holdout,
                  "Runs kept out of the fit, comma-separated (default: every third run in name order; none: fit all)");
  cmd->add_option(
      "--fit", o->fit,
      "Parameters to fit, comma-separated (default: compute_scale,fp8_compute_scale,memory_scale,comm_scale,"
      "kernel_launch_us)");
  cmd->add_option("--max-iterations", o->max_iterations, "Levenberg-Marquardt iterations at most")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", o->json, "Also write the calibration report (JSON) here");
  return [o]() { return run_calibrate(*o); };
}

}  // namespace shardplan::cli
