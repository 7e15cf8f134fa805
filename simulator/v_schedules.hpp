#pragma once
// Op orders of the V schedules that are not closed forms in (p, m, rank): V-Half and V-Min (the
// zero-bubble repository's greedy), and DualPipeV's eight steps. docs/split_backward_schedules.md
// §2.4-2.5 describes both references and lists their p = 4, m = 8 orders.
#include <vector>

#include "pipeline_schedule.hpp"

namespace shardplan::simulator {

// Every rank's op list of V-Half (s = vhalf) or V-Min (s = vmin) for p ranks and m micro-batches.
// Chunk 0 is the down leg (model stage r), chunk 1 the up leg (model stage 2p - 1 - r).
std::vector<std::vector<PipelineOp>> v_greedy_orders(PipelineSchedule s, int p, int m);

// DualPipeV's op list for rank r of p, m >= 2p micro-batches.
std::vector<PipelineOp> dualpipev_order(int p, int m, int r);

// DualPipe's op list for rank r of p (even), m >= 2p micro-batches (even): m / 2 each way. Chunk 0
// is the forward direction (model stage r, entered at rank 0), chunk 1 the reverse one (model stage
// p - 1 - r, entered at rank p - 1); micro-batches are numbered 0 .. m/2 - 1 in each.
std::vector<PipelineOp> dualpipe_order(int p, int m, int r);

}  // namespace shardplan::simulator
