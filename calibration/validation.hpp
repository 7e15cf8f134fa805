#pragma once
// Validation: predicted vs measured. Each configuration of a suite becomes a plan (model card +
// one-node cluster + fixed ParallelConfig + prediction), is trained for a few steps by the real
// `shardrun` under mpirun, and its measured step time and per-rank peak memory are compared with
// the prediction. Used by `shardplan validate`, read back by `shardplan calibrate` and the GUI.
#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/plan.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::calibration {

using formats::Plan;

inline constexpr const char* kValidationSchema = "shardplan.validation/1";

// One configuration to validate. JSON form (a `--configs` file is an array of these):
//   {"name", "model", "tp", "pp", "dp", "micro_batch_size", "global_batch_size", "seq_len"  (required),
//    "zero_stage": 0, "sharding_degree": 0 (= dp), "precision": "fp32",
//    "mixed_precision": "master_weights" | "autocast", "attention": "eager" | "flash" | "flash1" (default eager:
//    shardrun's attention without SDPA), "sequence_parallel": false,
//    "recompute": "none", "schedule": "1f1b", "virtual_stages": 1,
//    "lora": null | {"rank", "alpha": 16, "dropout": 0, "targets": [...], "base": "bf16" | "nf4" (QLoRA)},
//    "cp": 1, "cp_kind": "ring" | "all_to_all", "ep": 1}
struct ValidationEntry {
  std::string name;   // also the run's sub-directory: letters, digits, '.', '_', '-'
  std::string model;  // built-in card name or a model card path
  int tp = 1, pp = 1, dp = 1;
  int zero_stage = 0;
  int sharding_degree = 0;  // 0 = dp
  int micro_batch_size = 1;
  int global_batch_size = 0;
  int seq_len = 128;
  simulator::Precision precision = simulator::Precision::fp32;
  simulator::MixedPrecision mixed_precision = simulator::MixedPrecision::master_weights;
  simulator::AttentionKind attention = simulator::AttentionKind::eager;  // what shardrun runs on CPU
  bool sequence_parallel = false;
  simulator::Recompute recompute = simulator::Recompute::none;
  simulator::PipelineSchedule schedule = simulator::PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  simulator::LoraConfig lora;  // rank 0 = no LoRA
  int cp = 1;                  // context parallel ranks
  simulator::CpKind cp_kind = simulator::CpKind::ring;
  int ep = 1;  // expert parallel (MoE cards), folded over the dp x cp ranks

  [[nodiscard]] int ranks() const { return tp * pp * dp * cp; }
  // The configuration as the simulator takes it (not yet validated).
  [[nodiscard]] simulator::ParallelConfig parallel_config() const;
};

// The built-in suite: tiny and small models that train on the 2-core development machine.
std::vector<ValidationEntry> builtin_suite();

nlohmann::json to_json(const ValidationEntry& e);
// `where` names the entry in error messages, e.g. "configs.json: entry 3".
ValidationEntry entry_from_json(const nlohmann::json& j, const std::string& where);
// A JSON array of entries; errors name the file, the entry index and the field.
std::vector<ValidationEntry> load_suite_file(const std::string& path);
// The named entries, in suite order; an unknown name throws InputError listing the valid ones.
std::vector<ValidationEntry> select_entries(const std::vector<ValidationEntry>& suite,
                                            const std::vector<std::string>& names);

// The plan of one entry on `hw` (one node, devices_per_node = the entry's ranks), validated and
// simulated. Throws InputError when validate_config refuses the configuration.
Plan build_plan(const ValidationEntry& e, const simulator::HardwareProfile& hw);
// Predicted peak bytes of every world rank: its pipeline stage's total (rank order of the plan).
std::vector<double> predicted_peak_per_rank(const Plan& plan);

enum class RunStatus { ran, skipped, failed };
const char* to_string(RunStatus s);

struct ValidationRun {
  ValidationEntry entry;
  RunStatus status = RunStatus::skipped;
  std::string reason;  // why skipped / failed (failed: the tail of the output); empty when ran
  int ranks = 0;
  bool time_judged = true;                         // false when ranks x threads > cores
  std::string time_note;                           // "oversubscribed: 4 ranks x 1 thread on 2 cores"
  std::string plan_file, report_file, output_log;  // absolute; empty when not written
  int resolved_sharding_degree = 0;                // after validate_config (0 = unknown)
  int steps = 0;                                   // training steps of each repeat (steps_for; 0 = not run)

  bool has_prediction = false;
  double predicted_step_s = 0;
  double predicted_peak_bytes = 0;  // worst stage
  std::vector<double> predicted_peak_per_rank;

  bool has_measurement = false;
  double measured_step_s = 0;                // the median over the repeats
  std::vector<double> measured_step_s_runs;  // one per repeat, in run order
  // The machine's speed during each repeat: report.json measured.reference_gemm_seconds, the
  // faster of its start and end (a cold first call or a busy moment only ever slows one down;
  // absent from older reports: not pushed).
  std::vector<double> reference_gemm_s_runs;
  double measured_peak_bytes = 0;  // report.json measured.peak_memory_bytes (largest rank)
  std::vector<double> measured_peak_per_rank;

  double step_error = 0;    // (predicted - measured) / measured
  double memory_error = 0;  // the rank with the largest |error|
  int memory_error_rank = 0;
};

// Fills the measurement and the errors of `run` (whose prediction is set) from a shardrun
// report.json, adding its step time to the repeats' (the measured step time is their median).
// Throws InputError naming `source` when a figure is missing or not positive.
void apply_report(ValidationRun& run, const nlohmann::json& report, const std::string& source);

struct RunnerOptions {
  std::string shardrun;  // path of the shardrun binary
  std::string mpirun = "mpirun";
  std::string out_dir = "build/validate";  // one sub-directory per entry
  int steps = 8;                           // at least this many per run
  // and at least enough that the steps in the median (all but the first) are predicted to last
  // this long: a 0.1-s step's median of 7 is one scheduler hiccup from the truth on a 2-core VM.
  double min_measured_s = 2.0;
  int max_steps = 64;                         // the cap on what min_measured_s adds
  int threads = 1;                            // per rank
  int repeats = 1;                            // runs per entry; the step time is their median
  int cores = 1;                              // of this machine (timing honesty)
  double timeout_s = 900;                     // per run; a run over it is killed and "failed"
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT): the running job is ended
};

// Plans, runs and reads one entry. std::nullopt when `cancel` was raised during the run (the
// mpirun job is terminated first). Throws InputError when mpirun cannot be started.
std::optional<ValidationRun> run_entry(const ValidationEntry& e, const simulator::HardwareProfile& hw,
                                       const RunnerOptions& o);
// The same in parts, for repeats spread over a suite (round-robin: on a machine whose speed
// drifts over minutes, each entry's runs then sample different minutes, so their median is not
// one slow window's): prepare_entry plans and predicts (and says why not in `reason`);
// run_repeat runs it once more and reads its report (false when cancelled); runnable says
// whether it is planned, predicted to fit and has not failed or been refused.
ValidationRun prepare_entry(const ValidationEntry& e, const simulator::HardwareProfile& hw, const RunnerOptions& o);
bool run_repeat(ValidationRun& r, const RunnerOptions& o);
// Steps one run of `r` trains: max(o.steps, 1 + ceil(o.min_measured_s / predicted step)), at most
// max(o.steps, o.max_steps); o.steps without a prediction.
[[nodiscard]] int steps_for(const ValidationRun& r, const RunnerOptions& o);
[[nodiscard]] bool runnable(const ValidationRun& r);

struct ValidationErrorStats {
  int count = 0;
  double mean_abs = 0, median_abs = 0, worst_abs = 0;
  std::string worst_run;
};
// Mean, median and worst |relative error| of (relative error, run name) pairs.
ValidationErrorStats abs_error_stats(const std::vector<std::pair<double, std::string>>& errors);

struct ValidationSummary {
  int ran = 0, skipped = 0, failed = 0;
  ValidationErrorStats step_seconds;  // ran and time-judged runs only
  ValidationErrorStats peak_memory;   // every ran run
};

ValidationSummary summarize(const std::vector<ValidationRun>& runs);

struct ValidationReport {
  std::string hardware;       // profile name
  std::string hardware_file;  // what was given (name or path)
  int steps = 0, threads_per_rank = 1, cores = 1, repeats = 1;
  std::vector<ValidationRun> runs;
  // A measured profile's reference GEMM (profiled.reference_gemm_seconds, the faster of its
  // start and end, as for the runs); 0 for a datasheet profile.
  double profile_reference_gemm_s = 0;
};

// The measured profile's reference GEMM time in `profile` (a hardware profile JSON), 0 when it
// has none (a datasheet profile).
double profile_reference_gemm_seconds(const nlohmann::json& profile);
// How much slower the machine ran during `run` than when it was profiled: the median of its
// repeats' reference GEMM times over the profile's, minus 1 (+0.2: the runs saw a machine 20 %
// slower). NaN when either side was not timed.
double machine_slowdown(const ValidationRun& run, double profile_reference_gemm_s);

// Schema kValidationSchema. Paths under `base_dir` (the JSON file's directory) are written
// relative to it, others absolute.
nlohmann::json to_json(const ValidationReport& r, const std::string& base_dir);
// Reads what to_json wrote; relative paths are resolved against `base_dir`.
ValidationReport validation_from_json(const nlohmann::json& j, const std::string& source, const std::string& base_dir);

// SVG: predicted vs measured step time and peak memory (log-log), y = x and a +-10 % band, one
// circle per ran run in each panel, numbered, with a legend. Atomic write.
std::string svg_plot(const ValidationReport& r);
void write_svg_plot(const ValidationReport& r, const std::string& path);

}  // namespace shardplan::calibration
