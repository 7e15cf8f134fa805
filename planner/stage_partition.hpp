#pragma once
// Auto-partition applied to a configuration: per-layer and per-stage costs from the simulator's
// cost model, fed to the dynamic program of partition.hpp.
#include <optional>

#include "partition.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {

// The partition input of `cfg` (pipeline stages, v == 1) under the simulator's model.
PartitionInput partition_input(const simulator::Evaluator& ev, const simulator::ParallelConfig& cfg, PartitionGoal goal,
                               double memory_weight);

// The best layers-per-stage for `cfg` (capped at the usable device memory); nullopt when pp == 1,
// interleaved, or no split fits. `empty_edges`: the first and last stage may hold no block (the
// framework runs embedding-only and head-only chunks).
std::optional<std::vector<int>> choose_partition(const simulator::Evaluator& ev, const simulator::ParallelConfig& cfg,
                                                 PartitionGoal goal = PartitionGoal::speed, double memory_weight = 0.5,
                                                 bool empty_edges = false);

// L layers over p stages when p does not divide L, before auto-partition: extras go to the
// middle stages (stage 0 holds the most in-flight micro-batches and the embedding, the last
// stage the LM head).
std::vector<int> default_split(int layers, int stages);

}  // namespace shardplan::planner
