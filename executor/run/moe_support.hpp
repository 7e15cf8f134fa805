#pragma once
// Which mixture-of-experts plans shardrun runs (model/moe_block.hpp, parallel/expert_dispatch.hpp):
// dropless routing or token dropping by a capacity factor, LoRA on the routed experts, expert
// parallelism folded over tp x cp x dp (etp = tp or 1) with ZeRO 0-3, tp, sp, cp, pp and sharded
// checkpoints; refused with one InputError line each: ep on a dense card, MiCS sub-group
// sharding of an MoE card.
#include <string>

#include "executor/metrics/run_report.hpp"
#include "formats/plan.hpp"

namespace shardplan::executor {

// Throws InputError naming `src` and the plan field when the MoE side of `plan` is not run;
void check_moe_supported(const formats::Plan& plan, const std::string& src);

struct TrainerState;
// A step's MoE figures into `r` (MoE cards only): the expert all-to-all seconds since
// `a2a_before` (expert_all_to_all_seconds() at the step's start), and the routing imbalance the
// model recorded since the step began; with a capacity factor the copies dropped in the global
// batch (an all-reduce over the world: every rank calls it).
void record_moe(const TrainerState& s, double a2a_before, StepRecord& r);
// expert_all_to_all_seconds() (parallel/expert_dispatch.hpp), for the step's start.
double moe_a2a_seconds();

}  // namespace shardplan::executor
