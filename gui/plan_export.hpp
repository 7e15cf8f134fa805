#pragma once
// Export of a candidate as `shardplan plan --out` + `shardplan export` would write it: the same
// plan.json (schema, model card, resolved profile, config, prediction, search settings) and the
// same launch files (mpirun, sbatch, DeepSpeed JSON, Megatron args, SMP, NOTES), through the
// planner's own functions.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "candidate_row.hpp"
#include "formats/plan.hpp"
#include "interop/launch_export.hpp"

namespace shardplan::gui {

// `search_settings`: ResolvedRequest::search_settings of the search that found the row (opened
// plans carry their own).
formats::Plan make_plan(const CandidateRow& row, const nlohmann::json& search_settings);

// The CLI's `export` defaults: job name = model name, checkpoints in "checkpoints", auto-resume.
interop::ExportOptions cli_export_options(const formats::Plan& plan);

// Writes plan.json at `plan_path` and the launch files next to it (the scripts pass
// `plan_path` to shardrun). Returns every path written. Throws InputError.
std::vector<std::string> export_plan(const formats::Plan& plan, const std::string& plan_path);

}  // namespace shardplan::gui
