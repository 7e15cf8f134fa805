#pragma once
// torchtitan (pytorch/torchtitan): a plan as its job config, and a job config read back.
// Checked against the names in the file and version cited in torchtitan_flags.hpp.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "planner/plan.hpp"

namespace shardplan::interop {

// The job config (TOML) that runs the plan. InputError when torchtitan cannot run it (named).
std::string torchtitan_toml(const planner::Plan& plan);
// What the config cannot express (one line each; empty when everything is).
std::vector<std::string> torchtitan_notes(const planner::Plan& plan);
// The launch line: torchrun over the nodes with the config file (`config_path` shell-quoted).
std::string torchtitan_command_line(const planner::Plan& plan, const std::string& config_path);

// A torchtitan job config (TOML text) into a configuration; `source` names it in errors.
ImportResult import_torchtitan(std::string_view toml, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
