#pragma once
// --mtbf-hours, --checkpoint-write-GBps, --restart-s on `plan` and `simulate`: overrides of the
// hardware profile's "resilience" figures (simulator/goodput.hpp). They are written into the
// profile itself, so a plan embeds them and re-simulates to the same goodput.
#include <CLI/CLI.hpp>
#include <optional>

#include "simulator/hardware_profile.hpp"

namespace shardplan::cli {

struct ResilienceOverrides {
  std::optional<double> mtbf_hours;             // per node
  std::optional<double> checkpoint_write_GBps;  // per node
  std::optional<double> restart_s;
};

void add_resilience_options(CLI::App* cmd, ResilienceOverrides& o);
// Throws InputError naming the flag for a non-positive value (restart: negative).
void apply_resilience(const ResilienceOverrides& o, simulator::HardwareProfile& hw);

}  // namespace shardplan::cli
