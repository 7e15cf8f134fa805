#pragma once
// The hardware's and the frameworks' compute terms, fitted together (`calibrate --frameworks`):
// a hardware profile keeps what the hardware sustains, a framework what its kernels and engine
// reach of that. Legend:
//   run i     runs on hardware family h(i) (the profiles sharing one `fitted` block: p4d and
//             p4de), by framework f(i)
//   H_h       multiplies family h's fitted.compute_efficiency_scale (16-bit GEMM, attention curves)
//   H8_h      multiplies its fitted.fp8_compute_efficiency_scale (only where h has FP8 runs)
//   F_f       multiplies framework f's compute_efficiency (its shipped value c_f)
//   minimise  sum_i ln(pred_i / meas_i)^2  +  sum_f (w ln(F_f c_f))^2,   w = run_sd / prior_sd
// The prior (ln of a framework's term normal about 0 with sd prior_sd) keeps a framework at the
// common rate unless its runs say otherwise, and settles the split between hardware and framework
// that products alone leave open. A family without a fitted block (datasheet curves) gets no term.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibration.hpp"

namespace shardplan::calibration {

struct FrameworkFitOptions {
  double prior_sd = 0.10;  // sd of ln(compute_efficiency) across frameworks, before their runs
  double run_sd = 0.06;    // a run's |ln error| scale: the calibration set's mean error after the fit
  int max_iterations = 60;
  std::string held_out;  // a framework kept out: its runs predicted at compute_efficiency 1
};

enum class TermKind { hardware_16bit, hardware_fp8, framework };

struct FittedTerm {
  TermKind kind = TermKind::framework;
  std::string name;  // the framework, or the family's profile names ("p4d.24xlarge, p4de.24xlarge")
  int runs = 0;      // fitting runs that depend on it
  double shipped = 1, fitted = 1;
  double std_error = -1;  // of `fitted`; < 0 when not available
};

struct FrameworkFitResult {
  std::vector<FittedTerm> terms;            // families (16-bit, FP8), then frameworks, in first-appearance order
  std::vector<RunResult> runs;              // input order; holdout = the held-out framework's runs
  std::vector<std::string> run_frameworks;  // parallel to runs
  ErrorStats fit_before, fit_after, heldout_after;
  double heldout_bias = 0;  // mean signed error of the held-out runs
  int iterations = 0;
  bool converged = false;
  std::vector<std::string> notes;
};

// InputError when a run has no framework named, or when the held-out framework's runs rest on a
// 16-bit hardware term no other run informs (nothing would be predicted that was not fitted to
// them). An FP8 term only the held-out runs inform takes the family's 16-bit sustained fraction.
FrameworkFitResult fit_frameworks(const std::vector<MeasuredRun>& runs, const FrameworkFitOptions& options = {});

struct FrameworkHoldout {
  std::string framework;
  int runs = 0;
  bool predicted = false;
  std::string why_not;             // when not predicted
  std::vector<std::string> notes;  // the fit's notes (an FP8 term taken from the 16-bit one)
  ErrorStats error;
  double bias = 0;
};
// Each framework held out in turn (first-appearance order), the others fitted.
std::vector<FrameworkHoldout> leave_one_framework_out_joint(const std::vector<MeasuredRun>& runs,
                                                            const FrameworkFitOptions& options = {});

const char* to_string(TermKind k);
// Schema shardplan.framework-fit/1: the terms, the runs, the statistics.
nlohmann::json to_json(const FrameworkFitResult& r);

}  // namespace shardplan::calibration
