#pragma once
// Subcommands of the `shardplan` CLI. Each registers its options on the app and returns the
// callback that runs it; user mistakes surface as simulator::InputError (exit 2).
#include <CLI/CLI.hpp>
#include <functional>

namespace shardplan::cli {

using Run = std::function<int()>;

Run add_simulate_command(CLI::App& app);
Run add_plan_command(CLI::App& app);
Run add_explain_command(CLI::App& app);
Run add_export_command(CLI::App& app);
Run add_models_command(CLI::App& app);
Run add_hardware_command(CLI::App& app);
Run add_validate_command(CLI::App& app);
Run add_calibrate_command(CLI::App& app);
Run add_runs_command(CLI::App& app);

}  // namespace shardplan::cli
