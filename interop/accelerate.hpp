#pragma once
// Hugging Face Accelerate with FSDP: a plan as the YAML `accelerate config` writes plus the
// `accelerate launch` line, and such a YAML read back. Names checked against the file and
// version cited in accelerate_flags.hpp.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "planner/plan.hpp"

namespace shardplan::interop {

// The Accelerate config (YAML). InputError when Accelerate + FSDP cannot run the plan (named).
std::string accelerate_yaml(const planner::Plan& plan);
std::vector<std::string> accelerate_notes(const planner::Plan& plan);
// `accelerate launch --config_file <config_path> --num_machines N ... <script> <args...>`, every
// word shell-quoted; `script` is the user's training script (e.g. "train.py").
std::string accelerate_command_line(const planner::Plan& plan, const std::string& config_path,
                                    const std::string& script = "train.py");

// An Accelerate config (YAML text) into a configuration.
ImportResult import_accelerate(std::string_view yaml, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
