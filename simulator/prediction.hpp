#pragma once
// Prediction: what the simulator says about one configuration. Plain data, SI units.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework_terms.hpp"
#include "goodput.hpp"
#include "pipeline_schedule.hpp"

namespace shardplan::simulator {

struct MemoryBreakdown {        // bytes on one device
  double parameters = 0;        // base model weights held (frozen ones included)
  double gradients = 0;         // base model gradients
  double optimizer_states = 0;  // fp32 master + Adam moments of base weights (on device)
  double activations = 0;       // stored for backward, all in-flight micro-batches
  double lora = 0;              // LoRA adapters: weights + gradients + optimizer states
  double comm_buffers = 0;      // p2p and TP buffers held across the step
  double workspace = 0;         // the largest transient (outputs in flight, logits, ZeRO gradient
                                // buckets and gathered units)
  // The runtime beside the tensors (runtime_memory.hpp): outside the caching allocator.
  double runtime_context = 0;    // the driver context
  double communicators = 0;      // collective communicators' buffers (communicators_used x each)
  double library_workspace = 0;  // cuBLAS / cuBLASLt workspaces
  // Cached free blocks the caching allocator holds at the peak (the framework's
  // allocator_slack_fraction of allocated): in what "reserved" reports, not in what must fit, as
  // the allocator frees its cache and retries before an allocation fails.
  double allocator_slack = 0;
  // The tensors: what torch.cuda.max_memory_allocated reports.
  [[nodiscard]] double allocated() const {
    return parameters + gradients + optimizer_states + activations + lora + comm_buffers + workspace;
  }
  // What torch.cuda.max_memory_reserved reports.
  [[nodiscard]] double reserved() const { return allocated() + allocator_slack; }
  [[nodiscard]] double runtime() const { return runtime_context + communicators + library_workspace; }
  // What must fit in the device's memory: the tensors and the runtime.
  [[nodiscard]] double total() const { return allocated() + runtime(); }
  // What the device holds at the peak (nvidia-smi): the reserved pool and the runtime.
  [[nodiscard]] double device() const { return reserved() + runtime(); }
  // The figure a framework's log prints.
  [[nodiscard]] double reported(MemoryReport k) const {
    return k == MemoryReport::allocated ? allocated() : k == MemoryReport::reserved ? reserved() : device();
  }
};

struct StagePrediction {
  int stage = 0;
  int layers = 0;  // transformer blocks on this stage (all its chunks)
  bool has_embedding = false;
  bool has_head = false;
  int64_t parameters_per_device = 0;  // before ZeRO sharding (per tp rank)
  int in_flight_micro_batches = 0;    // in units of model-chunk micro-batches
  double forward_s = 0;               // one micro-batch, all chunks of the stage
  double backward_s = 0;              // incl. recompute
  double host_bytes = 0;              // offloaded optimizer states / activations, per device
  MemoryBreakdown memory;
};

// Sum of all parts == step_s (checked by tests).
struct TimeBreakdown {  // seconds per training step, along the critical stage
  double forward_compute_s = 0;
  double backward_compute_s = 0;
  double recompute_s = 0;
  double tp_comm_s = 0;          // exposed tensor-parallel collectives
  double cp_comm_s = 0;          // exposed context-parallel exchanges (ring KV p2p, Ulysses all-to-alls)
  double ep_comm_s = 0;          // exposed expert-parallel dispatch/combine all-to-alls (+ etp gathers)
  double pipeline_bubble_s = 0;  // idle time of the busiest stage (incl. p2p waits)
  double dp_exposed_comm_s = 0;  // DP / ZeRO communication not hidden behind compute
  double offload_exposed_s = 0;  // host<->device transfers not hidden behind compute
  double optimizer_s = 0;        // optimizer step (device or host)
  double sync_wait_s = 0;        // waiting at collectives for the slowest rank (measured skew)
  double step_s = 0;
  // Informational (already inside the parts above):
  double pp_p2p_s = 0;              // what p2p transfers add to the makespan
  double dp_overlapped_comm_s = 0;  // DP / ZeRO communication hidden behind compute
  double dp_total_comm_s = 0;       // DP / ZeRO communication, all of it
};

struct Prediction {
  // Echo of the inputs.
  std::string model_name;
  std::string hardware_name;
  // Whether the profile's efficiency terms are fitted to measured runs; if not, where they come
  // from (HardwareProfile::calibration): an uncalibrated prediction says so.
  bool hardware_calibrated = true;
  std::string hardware_calibration_rule;
  std::string framework_name;                           // "megatron@2022"; empty when none was named
  MemoryReport memory_reported = MemoryReport::device;  // the figure that framework's log prints
  int nodes = 0;
  int devices = 0;

  bool feasible = false;
  std::string infeasible_reason;  // one line, empty when feasible

  int64_t total_parameters = 0;
  int64_t active_parameters = 0;  // what one token runs through (== total unless MoE)
  int64_t trainable_parameters = 0;

  std::vector<StagePrediction> stages;
  int worst_stage = 0;    // stage with the largest device memory total
  MemoryBreakdown worst;  // == stages[worst_stage].memory
  double device_capacity_bytes = 0;
  double usable_bytes = 0;  // capacity x (1 - headroom)
  double headroom = 0;
  double host_bytes_per_node = 0;
  double host_capacity_bytes = 0;

  TimeBreakdown time;
  int micro_batches = 0;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double model_flops_per_step = 0;        // what the math needs (no recompute)
  double hardware_flops_per_step = 0;     // what the devices execute (incl. recompute)
  double achieved_tflops_per_device = 0;  // hardware FLOP/s per device / 1e12
  double mfu = 0;                 // model FLOP/s / (devices x the 16-bit (or fp32) peak), as the field reports it
  double gemm_peak_fraction = 0;  // the same over the peak of the precision the blocks' GEMMs run at (FP8's
                                  // under --fp8; else equal to mfu)

  // Time-to-train, when a token budget was given.
  std::optional<double> train_tokens;
  std::optional<double> train_time_s;
  std::optional<double> train_cost_usd;
  double price_usd_per_hour = 0;  // whole cluster
  // Failures (simulator/goodput.hpp): expected goodput at the optimal checkpoint interval, and
  // time and cost to train including failures (time / goodput), when a token budget was given.
  GoodputPrediction goodput;
  std::optional<double> train_time_with_failures_s;
  std::optional<double> train_cost_with_failures_usd;

  PipelineResult pipeline;  // event trace (for timelines)
};

// The fast analytical screen: allocation-free, no event simulation.
struct Estimate {
  bool fits = false;
  double worst_memory_bytes = 0;
  int worst_stage = 0;
  double step_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double goodput = 1;  // expected, at the optimal checkpoint interval (goodput.hpp)
};

}  // namespace shardplan::simulator
