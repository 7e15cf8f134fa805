#pragma once
// Measured runs from anywhere (`shardplan.runs/1`): the public record, a user's own training
// logs. Each run names its model, its hardware (a profile + nodes + overrides such as the network
// a cluster really had), its layout and settings, what was measured and where it was published.
// `shardplan validate --runs FILE` compares them with the simulator; `calibrate --runs FILE`
// fits a profile's physical terms to them, leave-one-source-out.
//
// File form:
//   {"schema": "shardplan.runs/1", "description": "...",
//    "runs": [{"name", "source" (a short id runs are grouped by), "citation",
//              "model": built-in name | model card | Hugging Face config.json fields (inline),
//              "framework": {"name", "version" (optional: the newest)} (optional): the framework that
//                           ran it (frameworks/registry.hpp); its defaults fill the config keys
//                           the run does not write, and its memory figure is what peak_memory_GiB is,
//              "hardware": {"profile": name or path, "nodes", "devices_per_node" (optional),
//                           "overrides": {profile fields, unit keys} (optional)},
//              "config": {the plan's config keys: "tensor_parallel", "pipeline_parallel",
//                         "data_parallel", "micro_batch_size", "global_batch_size", "seq_len", ...},
//              "measured": exactly one of "step_seconds", "tokens_per_second",
//                          "tokens_per_second_per_device", "samples_per_second";
//                          "peak_memory_GiB" (optional) with "peak_memory_kind" (allocated |
//                          reserved | device; default: what the framework's log reports, else device),
//              "note" (optional)}]}
#include <optional>
#include <string>
#include <vector>

#include "formats/plan.hpp"
#include "frameworks/framework_model.hpp"

namespace shardplan::calibration {

inline constexpr const char* kRunsSchema = "shardplan.runs/1";

struct RecordedRun {
  std::string name;
  std::string source;  // short id, the unit of leave-one-source-out
  std::string citation;
  std::string note;
  std::string hardware_profile;  // as written (built-in name or path)
  formats::Plan plan;            // model, cluster (profile with overrides, nodes), validated config
  double measured_step_s = 0;    // converted once from whichever figure was published
  std::string measured_key;      // the figure given, e.g. "tokens_per_second"
  double measured_value = 0;     // its value, in that key's unit
  std::optional<double> measured_peak_bytes;
  simulator::MemoryReport measured_peak_kind = simulator::MemoryReport::device;
  std::optional<frameworks::FrameworkModel> framework;  // as the run names it
  // The framework's name ("megatron"), or "unnamed": the unit of leave-one-framework-out.
  [[nodiscard]] std::string framework_name() const { return framework ? framework->name : "unnamed"; }
  [[nodiscard]] double tokens_per_step() const {
    return static_cast<double>(plan.config.global_batch_size) * plan.config.seq_len;
  }
};

struct RunsFile {
  std::string path;
  std::string description;
  std::vector<RecordedRun> runs;
};

// Reads and validates a runs file; every run's configuration passes validate_config on its
// cluster. Errors name the file, the run and the field. The plans are not simulated here.
RunsFile load_runs_file(const std::string& path);
// The same from parsed JSON; `source` names it in errors.
RunsFile runs_from_json(const nlohmann::json& j, const std::string& source);

// Path of a shipped suite ("published" -> <data dir>/runs/published.json); InputError listing the
// shipped names for anything else.
std::string suite_path(const std::string& name);
std::vector<std::string> shipped_suites();

// Adds one run (a `shardplan.runs/1` entry, as JSON) to the runs file at `path`: a new file
// (with `description`) when there is none; with `append`, the end of an existing one (whose run
// names stay unique); without it, an existing file is an InputError. The whole file is checked as
// load_runs_file checks it before anything is written, then written atomically. Returns it.
RunsFile add_run_to_file(const std::string& path, const nlohmann::json& run, bool append,
                         const std::string& description);

// Distinct sources in file order.
std::vector<std::string> sources_of(const std::vector<RecordedRun>& runs);

}  // namespace shardplan::calibration
