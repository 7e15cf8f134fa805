#pragma once
// Calibration (`shardplan calibrate`): refit a hardware profile's efficiency and overhead terms
// to measured step times. A few physically meaningful parameters (one line each in
// calibration_parameters()), fitted by Levenberg-Marquardt on log step time against the real
// simulator; runs marked hold-out stay out of the fit and show the error on configurations the
// fit never saw. No per-configuration factors.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/plan.hpp"
#include "runs_file.hpp"
#include "simulator/hardware_profile.hpp"

namespace shardplan::calibration {

using formats::Plan;

inline constexpr const char* kCalibrationSchema = "shardplan.calibration/1";
inline constexpr const char* kMethod = "Levenberg-Marquardt on log step time";

using Params = std::vector<double>;  // one value per calibration_parameters() entry

// One measured run: the plan it ran and its measured step time.
struct MeasuredRun {
  std::string name;
  Plan plan;
  double measured_step_s = 0;
  bool holdout = false;
  std::string source;  // the runs file it came from
  // Recorded runs (shardplan.runs/1) keep their own cluster's profile: the parameters scale it
  // instead of the calibrated base, and `group` is their source id (leave-one-source-out).
  bool own_hardware = false;
  std::string group;
  std::string framework;  // the framework that ran it (recorded runs; "unnamed" when none is named)
};

struct MeasuredRuns {
  std::vector<MeasuredRun> runs;     // status "ran" and time_judged, in file order
  std::vector<std::string> ignored;  // "name: why" for every other run
  std::string hardware_file;         // the first file's "hardware_file", resolved ("" if none)
};

// Reads `shardplan validate --json` files (schema shardplan.validation/1) and merges them; a
// relative plan_file is relative to its JSON file's directory, a relative hardware_file too when
// it exists there (else it is taken as given). A name that repeats gets "#2", "#3" appended.
// Errors name the file and the field.
MeasuredRuns load_measured_runs(const std::vector<std::string>& paths);

// Recorded runs as calibration runs: own_hardware, group = their source id, source = the file.
std::vector<MeasuredRun> measured_from_recorded(const std::vector<RecordedRun>& runs);
// Keeps the runs named in `only` (all when empty) less those named in `exclude`: by run name,
// group (source id), profile name, or a name prefix ending in '*'. InputError naming the flag
// for a name that matches nothing.
void select_runs(std::vector<MeasuredRun>& runs, const std::vector<std::string>& only,
                 const std::vector<std::string>& exclude = {});

// Marks hold-out runs: the ones named (InputError naming --holdout for an unknown name or when
// fewer than `free_parameters` runs would remain), or by default every third run in name order
// (indices 2, 5, 8, ...) when at least `free_parameters` runs stay in the fit. Returns "" or a
// one-line note saying why there is no hold-out.
std::string assign_holdout(std::vector<MeasuredRun>& runs, const std::vector<std::string>& names, int free_parameters);

// A calibration parameter. Values are in natural units: a factor (scale) or microseconds.
enum class ParamKind { scale, microseconds };
struct ParamSpec {
  const char* name;  // also the JSON key, carrying its unit
  ParamKind kind;
  const char* meaning;              // one line
  std::vector<const char*> fields;  // dotted keys of the written profile it changes
  double (*prior)(const simulator::HardwareProfile&);
  void (*apply)(simulator::HardwareProfile&, double value);
};
const std::vector<ParamSpec>& calibration_parameters();
int parameter_index(const std::string& name);  // -1 if unknown

Params prior_params(const simulator::HardwareProfile& base);
// `base` with every parameter applied (named apply_params: a bare apply() would meet std::apply by ADL).
simulator::HardwareProfile apply_params(const simulator::HardwareProfile& base, const Params& params);

// The run's plan (model, config, nodes, devices per node) on `hw`: predicted step seconds.
double predicted_step_s(const MeasuredRun& run, const simulator::HardwareProfile& hw);
// With `params` applied to the run's own profile (own_hardware) or else to `base`.
double predicted_step_s(const MeasuredRun& run, const simulator::HardwareProfile& base, const Params& params);

struct CalibrationOptions {
  std::vector<std::string> parameters;  // names to fit; empty = all; the others stay at the prior
  int max_iterations = 100;
};
// How many parameters `options` fits; InputError naming --fit for an unknown name.
int free_parameters(const CalibrationOptions& options);

struct ParamResult {
  std::string name;
  double prior = 0;
  double value = 0;
  bool fitted = false;      // asked for
  bool identified = false;  // fitted and the fitting runs' step times depend on it
  double std_error = -1;    // natural units; < 0 when not available
};

struct RunResult {
  std::string name;
  bool holdout = false;
  int nodes = 1;
  double measured_s = 0, before_s = 0, after_s = 0;
  [[nodiscard]] double error_before() const { return (before_s - measured_s) / measured_s; }
  [[nodiscard]] double error_after() const { return (after_s - measured_s) / measured_s; }
};

struct ErrorStats {  // of |relative error|
  int runs = 0;
  double mean = 0, median = 0, worst = 0;
};
ErrorStats error_stats(const std::vector<double>& relative_errors);
// The same, and the mean signed error (bias).
void signed_stats(const std::vector<double>& relative_errors, ErrorStats& stats, double& bias);

struct CalibrationResult {
  simulator::HardwareProfile base, calibrated;
  Params values;
  std::vector<ParamResult> parameters;  // table order
  std::vector<RunResult> runs;          // input order
  std::vector<std::string> runs_files;  // distinct MeasuredRun::source, in order
  ErrorStats fit_before, fit_after, holdout_before, holdout_after;
  int iterations = 0;
  bool converged = false;
  std::vector<std::string> notes;  // one line each
};

CalibrationResult calibrate(const simulator::HardwareProfile& base, const std::vector<MeasuredRun>& runs,
                            const CalibrationOptions& options = {});

// Leave-one-source-out: for each group (source), fit on every other group's runs and predict
// this one's. Groups in first-appearance order; a group whose removal leaves fewer fitting runs
// than free parameters is reported with fitted = false.
struct SourceHoldout {
  std::string group;
  int runs = 0;
  bool fitted = false;
  ErrorStats before, after;                // |relative step-time error| of this group's runs
  double bias_before = 0, bias_after = 0;  // mean signed error
  Params values;                           // the fit without this group
};
std::vector<SourceHoldout> leave_one_source_out(const simulator::HardwareProfile& base,
                                                const std::vector<MeasuredRun>& runs,
                                                const CalibrationOptions& options);

// The report (schema shardplan.calibration/1): parameters, per-run table, error statistics.
nlohmann::json to_json(const CalibrationResult& r);
// The calibrated profile in the hardware schema: name "<base>-calibrated", measured, a
// "calibration" object and a "sources" entry per changed figure (the base's other sources kept).
nlohmann::json calibrated_profile_json(const CalibrationResult& r);

}  // namespace shardplan::calibration
