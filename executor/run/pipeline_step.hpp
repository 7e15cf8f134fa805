#pragma once
// One training step's forward and backward passes on this rank, as its pipeline stage's op list
// (simulator::pipeline_stage_order: gpipe, 1F1B or interleaved 1F1B — the same lists the
// simulator times). pp = 1 is the one-stage case of the same code.
//
// Each op is the forward or backward of one micro-batch through one of the stage's model
// chunks. Activations (forward) and their gradients (backward) travel between virtual stages
// vs and vs +- 1 on the pp group with non-blocking sends and receives tagged by (direction,
// receiving virtual stage, micro-batch); only receives block, and the op lists are deadlock-free
// by construction (each receive's data is sent by an op that does not wait on this one), so a
// stuck or dead peer surfaces as a timed-out receive (CommError), never as a silent hang.
//
// Legend: p stages, v chunks per stage, m micro-batches, vs = chunk * p + stage.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace shardplan::executor {

struct TrainerState;

struct Batch {
  torch::Tensor ids, labels;  // (n, S)
  int64_t tokens = 0;
};

// What this rank measured in one step's schedule.
struct PipelineFigures {
  double busy_s = 0;                 // forward/backward ops (incl. their tp/dp communication)
  double bubble_s = 0;               // blocked waiting for a peer's activation or gradient
  double p2p_s = 0;                  // other point-to-point time (posting, completing sends)
  int64_t peak_in_flight_bytes = 0;  // tensor bytes held by micro-batches between F and B
  int max_in_flight = 0;             // (chunk, micro-batch) pairs held at once, at most
  // Time in the schedule's ops, the waits for peers left out: forwards, backwards (B, the input
  // gradients, under a split schedule) and the deferred weight gradients (W; 0 unless split).
  double forward_s = 0, input_grad_s = 0, weight_grad_s = 0;
};

struct PipelineStepResult {
  double loss_sum = 0;  // this rank's summed token losses (last stage only; else 0)
  PipelineFigures figures;
};

// Fault injection: `throw_at_op` >= 0 makes this rank throw before its op of that index (a
// stage failing mid-schedule); `overflow` makes the rank's backward gradients infinite.
struct StepFaults {
  bool overflow = false;
  int throw_at_op = -1;
};

PipelineStepResult run_pipeline_step(TrainerState& s, int64_t step, const std::vector<Batch>& batches,
                                     double global_tokens, const StepFaults& faults);

}  // namespace shardplan::executor
