#pragma once
// Which mixture-of-experts plans shardrun runs (model/moe_block.hpp, parallel/expert_dispatch.hpp):
// dropless routing, expert parallelism over the dp ranks (etp = tp) with ZeRO 0-3, tp, sp and
// pp; refused with one InputError line each: token dropping by a capacity factor, ep on a
// dense card, MiCS sub-group sharding of an MoE card, and sharded checkpoints under ep > 1.
#include <string>

#include "executor/metrics/run_report.hpp"
#include "planner/plan.hpp"

namespace shardplan::executor {

// Throws InputError naming `src` and the plan field when the MoE side of `plan` is not run;
// `checkpoints`: the run writes or resumes sharded checkpoints.
void check_moe_supported(const planner::Plan& plan, const std::string& src, bool checkpoints);

struct TrainerState;
// A step's MoE figures into `r` (MoE cards only): the expert all-to-all seconds since
// `a2a_before` (expert_all_to_all_seconds() at the step's start), and the routing imbalance the
// model recorded since the step began.
void record_moe(const TrainerState& s, double a2a_before, StepRecord& r);
// expert_all_to_all_seconds() (parallel/expert_dispatch.hpp), for the step's start.
double moe_a2a_seconds();

}  // namespace shardplan::executor
