#pragma once
// Using a framework's model on a configuration: its defaults for what the user did not write, its
// terms bound for the simulator, and whether it can run the result at all.
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "framework_model.hpp"

namespace shardplan::frameworks {

// `config` (config keys, as runs files and plans write them) with the framework's defaults for
// the keys it lacks; keys it has win.
nlohmann::json with_defaults(const FrameworkModel& fw, const nlohmann::json& config);
// The configuration a runs file or plan means: `config` with the defaults, parsed, bound. A default
// that does not apply to the result (fp32 gradient accumulation at ZeRO 2/3) falls back as the
// framework does (simulator::grad_accum_for). InputErrors name `source`.
sim::ParallelConfig config_with_framework(const FrameworkModel& fw, const nlohmann::json& config,
                                          const std::string& source);
// The same on a built configuration: every default whose key is not in `explicit_keys` (the
// settings the user wrote) replaces the configuration's value.
void apply_defaults(const FrameworkModel& fw, sim::ParallelConfig& cfg, const std::set<std::string>& explicit_keys);
// The kernel-level settings a framework picks for itself (attention, fusion, mixed precision,
// gradient-accumulation dtype, ZeRO-3 fetch) at one precision, parsed once; unset where it has
// no default.
struct KernelDefaults {
  std::optional<sim::AttentionKind> attention;
  std::optional<sim::Fusion> fusion;
  std::optional<sim::MixedPrecision> mixed_precision;
  std::optional<sim::GradAccumDtype> grad_accum_dtype;
  std::optional<sim::Zero3Fetch> zero3_fetch;
  std::optional<int> recompute_every;  // applied where the configuration leaves it unset (0)
};
KernelDefaults kernel_defaults(const FrameworkModel& fw, sim::Precision precision);
// What apply_defaults does with every key the configuration's JSON writes explicit but those five
// (and an unset recompute_every), without its JSON round trip:
// `d` is kernel_defaults(fw, cfg.precision). The search asks it of many configurations.
void apply_kernel_defaults(const FrameworkModel& fw, const KernelDefaults& d, sim::ParallelConfig& cfg);
// cfg.framework = the framework's terms, named "name@version".
void bind(const FrameworkModel& fw, sim::ParallelConfig& cfg);

// The first setting of `cfg` outside the framework's knob table, as one line naming the knob
// ("pipeline schedule interleaved: DeepSpeed's pipeline engine runs 1F1B only"), or nullopt.
std::optional<std::string> why_not(const FrameworkModel& fw, const sim::ParallelConfig& cfg,
                                   const sim::ClusterSpec& cluster);

}  // namespace shardplan::frameworks
