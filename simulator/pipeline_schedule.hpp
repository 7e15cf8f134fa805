#pragma once
// Event simulation of one training step's pipeline schedule: stages x micro-batches (x model
// chunks for interleaved), non-uniform stage times, p2p transfer time between stages.
// Schedules as in Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", §2.2): GPipe (all forwards, then all backwards), 1F1B
// (PipeDream-Flush) and interleaved 1F1B with v model chunks per stage (Megatron-LM order).
#include <cstdint>
#include <string>
#include <vector>

#include "enum_names.hpp"

namespace shardplan::simulator {

// zb1p / zb2p: the zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, §3): the backward split into B (input gradients) and W (weight
// gradients), W deferred into what would be bubble.
// zbv: the zero-bubble V schedule (§6): two chunks per rank in a V, rank r holding model stages
// r and 2p - 1 - r, the forward down the ranks and back up.
// vhalf / vmin: the memory-controlled V schedules V-Half and V-Min (Qi et al., "Pipeline
// Parallelism with Controllable Memory", arXiv 2405.15362): zbv's placement, about a half / a
// third of its activations.
// dualpipev: DeepSeek's DualPipeV (github.com/deepseek-ai/DualPipe dualpipev.py): zbv's placement,
// a forward and a full backward of the two chunks overlapped as one op in the steady phase.
// dualpipe: DeepSeek's bidirectional DualPipe (DeepSeek-V3 report §3.2.1; dualpipe.py): two
// pipelines over the same p ranks in opposite directions, m/2 micro-batches each; rank r holds
// model stage r (chunk 0, the forward direction) and stage p - 1 - r (chunk 1, the reverse one),
// so every stage's parameters twice over the pipeline. DualPipeV is this schedule cut in half.
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved, zb1p, zb2p, zbv, vhalf, vmin, dualpipev, dualpipe };
template <>
struct EnumNames<PipelineSchedule> {
  static constexpr NameTable<PipelineSchedule, 10> table{{{PipelineSchedule::gpipe, "gpipe"},
                                                          {PipelineSchedule::one_f_one_b, "1f1b"},
                                                          {PipelineSchedule::interleaved, "interleaved"},
                                                          {PipelineSchedule::zb1p, "zb1p"},
                                                          {PipelineSchedule::zb2p, "zb2p"},
                                                          {PipelineSchedule::zbv, "zbv"},
                                                          {PipelineSchedule::vhalf, "vhalf"},
                                                          {PipelineSchedule::vmin, "vmin"},
                                                          {PipelineSchedule::dualpipev, "dualpipev"},
                                                          {PipelineSchedule::dualpipe, "dualpipe"}}};
};
const char* to_string(PipelineSchedule s);
// Whether the schedule places a rank's two chunks in a V (chunk 1 of rank r is model stage
// 2p - 1 - r) instead of interleaving them (chunk c of rank r is model stage c p + r).
constexpr bool v_shaped(PipelineSchedule s) {
  return s == PipelineSchedule::zbv || s == PipelineSchedule::vhalf || s == PipelineSchedule::vmin ||
         s == PipelineSchedule::dualpipev;
}
// Whether two pipelines run in opposite directions, each rank holding a stage of each (DualPipe):
// each stage's parameters live on two ranks (r and p - 1 - r), every chunk runs m/2 micro-batches.
constexpr bool bidirectional(PipelineSchedule s) { return s == PipelineSchedule::dualpipe; }
// Whether every rank holds two model chunks (a V, or DualPipe's two directions).
constexpr bool two_chunks(PipelineSchedule s) { return v_shaped(s) || bidirectional(s); }
// Whether the schedule runs a micro-batch's backward as two ops, B then a deferred W (DualPipe
// for some micro-batches only: the others run one full backward).
constexpr bool splits_backward(PipelineSchedule s) {
  return s == PipelineSchedule::zb1p || s == PipelineSchedule::zb2p || two_chunks(s);
}
// The fewest micro-batches the schedule runs with p stages: DualPipeV and DualPipe need 2p
// (deepseek-ai/DualPipe @ 3da1bbe: dualpipev.py:318 and dualpipe.py:333, num_chunks >= num_ranks * 2).
constexpr int min_micro_batches(PipelineSchedule s, int stages) {
  return s == PipelineSchedule::dualpipev || s == PipelineSchedule::dualpipe ? 2 * stages : 1;
}

struct PipelineInput {
  int stages = 1;          // p
  int micro_batches = 1;   // m
  int virtual_stages = 1;  // v (model chunks per stage); 1 unless interleaved
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  // Per model chunk, indexed [chunk * stages + stage] (size p * v): time of one micro-batch's
  // forward / backward (backward includes any recompute) through that chunk.
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  // Bytes of activations one micro-batch leaves stored on the chunk until its backward
  // (used for the per-stage peak); may be empty (then peaks are reported as 0).
  std::vector<double> stored_activation_bytes;
  // Per model chunk: of backward_s, the weight-gradient part (W); a schedule that splits the
  // backward runs it as an op of its own (B takes the rest). May be empty (W = 0).
  std::vector<double> weight_grad_s;
  double p2p_s = 0;  // time to send one micro-batch's activations (or gradients) to the next stage
  // Keep every op's event (PipelineResult::events: a Gantt chart, a trace); the summaries are kept
  // either way. A pipeline of many micro-batches has 2 p v m of them.
  bool record_events = true;
};

// One op of a stage's schedule: forward or backward of micro-batch `mb` through the stage's
// model chunk `chunk` (0 unless interleaved or V-shaped).
struct PipelineOp {
  int chunk = 0;
  int mb = 0;
  bool backward = false;
  bool weight = false;  // the deferred weight-gradient part of a split backward (backward is true too)
  // In a schedule that splits the backward: this backward is whole, B and W in one op (DualPipe's
  // full backward).
  bool full = false;
  // DualPipe's overlapped pair: this forward runs as one op with the full backward of micro-batch
  // overlap_mb through chunk overlap_chunk (-1: no pair).
  int overlap_chunk = -1;
  int overlap_mb = -1;
};

struct PipelineEvent {
  int stage = 0;
  int chunk = 0;
  int micro_batch = 0;
  bool backward = false;
  double start_s = 0;
  double end_s = 0;
  bool weight = false;  // a split backward's W (backward is true too); its B carries the rest
  // A full backward (DualPipe) is recorded as its B and W parts back to back, and an overlapped
  // pair as its two halves; `overlapped` marks the events of a pair.
  bool overlapped = false;
};

struct PipelineResult {
  double makespan_s = 0;                             // first forward start -> last backward end
  std::vector<double> stage_busy_s;                  // sum of op durations per stage
  std::vector<double> stage_end_s;                   // when each stage finishes its last backward
  std::vector<int> max_in_flight;                    // per stage: max (chunk, micro-batch) pairs whose
                                                     // forward started and backward has not finished
  std::vector<double> peak_stored_activation_bytes;  // per stage
  std::vector<PipelineEvent> events;                 // in execution order per stage, stage-major
                                                     // (empty unless PipelineInput::record_events)
  // Bubble: makespan minus the busiest stage's busy time.
  [[nodiscard]] double bubble_s() const;
};

// Validates: stages, micro_batches >= 1; interleaved needs v >= 2 and m % p == 0; vector sizes.
// Throws InputError on user-level mistakes.
PipelineResult simulate_pipeline(const PipelineInput& in);
// The same simulation's makespan alone (no events kept): simulate_pipeline(in).makespan_s.
double pipeline_makespan(const PipelineInput& in);

// The op order stage `stage` runs (Megatron-LM schedules.py); the executor runs exactly this
// list, so simulator and executor share one definition of each schedule. Validates as
// simulate_pipeline does.
std::vector<PipelineOp> pipeline_stage_order(PipelineSchedule schedule, int stages, int micro_batches,
                                             int virtual_stages, int stage);

// Closed forms (used by the fast analytical path and checked against the event simulation):
// bubble fraction (p-1)/m for gpipe and 1f1b, (p-1)/(v*m) interleaved.
double bubble_fraction(PipelineSchedule s, int stages, int micro_batches, int virtual_stages);
// DualPipeV's bubble over p ranks, per chunk F forward, B input-gradient backward, W weight
// gradient: DualPipe's README (PP/2 - 1)(F&B + B_full - 3W) with PP = 2p and our pair F&B = F + B + W,
// less min(F, (p - 1)(B - F)) when B > F; at or below the event simulation.
double dualpipev_bubble(int stages, double forward_s, double backward_input_s, double weight_grad_s);
// DualPipe over p ranks (p even): DualPipeV's over p / 2, its cut-in-half (the README gives both
// one bubble, (PP/2 - 1)(F&B + B - 3W), PP = p here); F, B, W per chunk of L / p layers.
double dualpipe_bubble(int stages, double forward_s, double backward_input_s, double weight_grad_s);
// Micro-batches (in units of model-chunk micro-batches) stage `stage` holds at most:
// gpipe m*v; 1f1b min(p - stage, m); interleaved Megatron warmup + 1, capped at m*v; a split
// backward holds a micro-batch until its W: zb1p min(p, m), zb2p min(2p - 1, m) on every stage;
// V schedules count chunk micro-batches: zbv 2p, vhalf 2 floor((p+2)/2), vmin 2 floor((p+4)/3),
// dualpipev 2p + 1 (the most any rank holds), capped at 2m; dualpipe p + 1 (PP + 1 at PP = p),
// capped at m (each of its chunks runs m / 2).
int in_flight_micro_batches(PipelineSchedule s, int stages, int stage, int micro_batches, int virtual_stages);

}  // namespace shardplan::simulator
