#pragma once
// The search inside one framework (`plan --framework`): the space narrowed to its knob table and
// its defaults, and each point judged by frameworks::why_not, so every plan is one it runs; and,
// without one, which frameworks run a configuration.
#include <set>
#include <string>
#include <vector>

#include "frameworks/framework_model.hpp"
#include "search.hpp"

namespace shardplan::planner {

// Narrows `s` and `c` to what `fw` runs and sets c.framework. The fixed fields (attention, fusion,
// mixed precision, gradient-accumulation dtype, CP kind, ZeRO-3 fetch) take the framework's defaults unless
// named in `given` (the flag's key, e.g. "fusion"); a given value the framework cannot run is an
// InputError naming the flag. Lists keep only the values the table allows. The search's
// configurations carry its terms (SearchSpace::base_config binds them).
void narrow_to_framework(const frameworks::FrameworkModel& fw, SearchSpace& s, Constraints& c,
                         const std::set<std::string>& given);

// The registry's frameworks (each at its newest version) that run `cfg`'s layout and features on
// `cluster`, each with its own kernels (attention, fusion, mixed precision: its defaults).
std::vector<std::string> frameworks_running(const simulator::ParallelConfig& cfg,
                                            const simulator::ClusterSpec& cluster);
// Whether any of them does (stops at the first).
bool some_framework_runs(const simulator::ParallelConfig& cfg, const simulator::ClusterSpec& cluster);

}  // namespace shardplan::planner
