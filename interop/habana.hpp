#pragma once
// Optimum-Habana on Gaudi: a plan as the `gaudi_spawn.py ... --use_deepspeed run_lora_clm.py ...`
// (or run_clm.py) command of the Llama-2-70B LoRA example plus its DeepSpeed JSON, and such a
// command read back. Names checked against the files and version cited in habana_flags.hpp.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "planner/plan.hpp"

namespace shardplan::interop {

// The command (bash, shell-quoted) that runs the plan; `ds_config_path` is where the DeepSpeed
// JSON is written. InputError when the plan is not for Gaudi or Optimum-Habana cannot run it.
std::string habana_command_line(const planner::Plan& plan, const std::string& ds_config_path);
// The DeepSpeed JSON the command passes with --deepspeed.
nlohmann::json habana_deepspeed_config(const planner::Plan& plan);
std::vector<std::string> habana_notes(const planner::Plan& plan);

// An Optimum-Habana command (script text) into a configuration; its --deepspeed JSON, when the
// command names one, is read from `ds_config` (null: not given).
ImportResult import_habana(std::string_view script, const nlohmann::json& ds_config, const ImportContext& ctx,
                           const std::string& source);

}  // namespace shardplan::interop
