#include "resilience_options.hpp"

#include <cmath>

#include "simulator/errors.hpp"

namespace shardplan::cli {

void add_resilience_options(CLI::App* cmd, ResilienceOverrides& o) {
  cmd->add_option("--mtbf-hours", o.mtbf_hours,
                  "Mean time between failures of one node, hours (default: the profile's)");
  cmd->add_option("--checkpoint-write-GBps", o.checkpoint_write_GBps,
                  "Checkpoint write bandwidth per node, GB/s (default: the profile's)");
  cmd->add_option("--restart-s", o.restart_s, "Seconds from a failure to training again (default: the profile's)");
}

void apply_resilience(const ResilienceOverrides& o, simulator::HardwareProfile& hw) {
  auto positive = [](const std::optional<double>& v, const char* flag, const char* what) {
    if (v && !(std::isfinite(*v) && *v > 0))
      throw simulator::InputError(std::string(flag) + ": expected " + what + " > 0, got " + std::to_string(*v));
  };
  positive(o.mtbf_hours, "--mtbf-hours", "hours");
  positive(o.checkpoint_write_GBps, "--checkpoint-write-GBps", "GB/s");
  if (o.restart_s && !(std::isfinite(*o.restart_s) && *o.restart_s >= 0))
    throw simulator::InputError("--restart-s: expected seconds >= 0, got " + std::to_string(*o.restart_s));
  if (o.mtbf_hours) hw.resilience.node_mtbf_s = *o.mtbf_hours * 3600;
  if (o.checkpoint_write_GBps) hw.resilience.checkpoint_write_Bps = *o.checkpoint_write_GBps * 1e9;
  if (o.restart_s) hw.resilience.restart_s = *o.restart_s;
}

}  // namespace shardplan::cli
