#include "plan_export.hpp"

#include <filesystem>

#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::gui {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;

formats::Plan make_plan(const CandidateRow& row, const nlohmann::json& search_settings) {
  if (!row.prediction || !row.model) throw sim::InputError("export: the candidate has not been simulated");
  if (!row.prediction->feasible)
    throw sim::InputError("export: " + row.candidate.key + " does not fit (" + row.prediction->infeasible_reason + ")");
  return formats::Plan{sim::version(),        *row.model,
                       row.candidate.cluster, row.candidate.config,
                       *row.prediction,       row.search_settings ? *row.search_settings : search_settings,
                       std::nullopt};
}

interop::ExportOptions cli_export_options(const formats::Plan& plan) {
  // As `shardplan export` (cli/export_command.cpp) fills them with its defaults.
  interop::ExportOptions opt;
  interop::ShardrunArgs run;
  run.checkpoint_dir = "checkpoints";
  run.resume_auto = true;
  opt.mpirun.run = run;
  opt.slurm.job_name = plan.model.name;
  opt.slurm.time_limit = "24:00:00";
  opt.slurm.max_retries = 3;
  opt.slurm.run = run;
  return opt;
}

std::vector<std::string> export_plan(const formats::Plan& plan, const std::string& plan_path) {
  if (plan_path.empty()) throw sim::InputError("export: expected a file name for plan.json");
  const std::filesystem::path p(plan_path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  // Launch files first: a bad option fails before plan.json is written.
  std::vector<std::string> written = interop::export_all(plan, dir, plan_path, cli_export_options(plan));
  formats::save_plan(plan, plan_path);
  written.insert(written.begin(), plan_path);
  return written;
}

}  // namespace shardplan::gui
