#pragma once
// Auto-partition (SageMaker model parallelism's "auto_partition" with "optimize": speed|memory
// and "memory_weight"): choose how many consecutive layers each pipeline stage (or model chunk)
// holds, by dynamic programming over contiguous layer ranges.
#include <string>
#include <vector>

namespace shardplan::planner {

enum class PartitionGoal { speed, memory, blend };

struct PartitionInput {
  int stages = 1;  // pipeline stages x virtual stages (model chunks, in model order)
  // Per layer (size L, L >= stages): time of one micro-batch through it (forward + backward) and
  // the bytes it costs wherever it lands: model states, and activations per in-flight micro-batch.
  std::vector<double> layer_time_s;
  std::vector<double> layer_state_bytes;
  std::vector<double> layer_activation_bytes;
  // Per stage (size `stages`): fixed extras (embedding on the first, LM head + loss on the last,
  // buffers everywhere) and how many micro-batches of activations the stage keeps in flight.
  std::vector<double> stage_extra_time_s;
  std::vector<double> stage_extra_bytes;
  std::vector<double> stage_in_flight;
  PartitionGoal goal = PartitionGoal::speed;
  double memory_weight = 0.5;   // blend: score = (1-w) * time/T0 + w * memory/M0
  double memory_cap_bytes = 0;  // > 0: every stage must fit, else infeasible
  // The first and the last stage may hold no layer (an embedding-only and a head-only chunk:
  // Megatron's pipeline_model_parallel_layout, torchtitan's module_fqns_per_model_part).
  bool empty_edges = false;
};

struct PartitionResult {
  bool feasible = false;
  std::string reason;                 // why not, when infeasible
  std::vector<int> layers_per_stage;  // sums to L, each >= 1 (the edges >= 0 with empty_edges)
  std::vector<double> stage_time_s;   // per micro-batch
  std::vector<double> stage_bytes;
  double max_stage_time_s = 0;
  double max_stage_bytes = 0;
};

// Minimises the largest per-stage cost (time, memory, or the normalised blend; ties broken by
// the other measure, then by the most even split). O(stages * L^2). Throws
// simulator::InputError on malformed input (sizes, negative values, L < stages).
PartitionResult auto_partition(const PartitionInput& in);

// Cost of a given split (for brute-force checks and for evaluating user partitions).
PartitionResult evaluate_partition(const PartitionInput& in, const std::vector<int>& layers_per_stage);

}  // namespace shardplan::planner
