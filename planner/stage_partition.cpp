#include "stage_partition.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;

PartitionInput partition_input(const sim::Evaluator& ev, const sim::ParallelConfig& cfg, PartitionGoal goal,
                               double memory_weight) {
  const sim::ConfigContext c(ev.context(), cfg);
  const int p = cfg.pp, L = static_cast<int>(ev.model().num_layers), m = cfg.micro_batches();
  // Memory of a stage with n layers and no activations: its model states are linear in n, so two
  // points give them; the workspace (transients) is taken once per stage, at one layer.
  auto memory = [&](int stage, int layers) {
    sim::StageShape shape;
    shape.stage = stage;
    shape.layers = layers;
    shape.embedding = stage == 0;
    shape.head = stage == p - 1;
    return sim::stage_memory(c, shape).device;
  };
  auto states = [&](int stage, int layers) {
    const sim::MemoryBreakdown m = memory(stage, layers);
    return m.total() - m.workspace;
  };
  const double per_layer_states = states(p > 2 ? 1 : 0, 1) - states(p > 2 ? 1 : 0, 0);
  const sim::ChunkTime layer = sim::chunk_time(c, {1, false, false});
  PartitionInput in;
  in.stages = p;
  in.layer_time_s.assign(L, layer.forward_s + layer.backward_s);
  in.layer_state_bytes.assign(L, per_layer_states);
  in.layer_activation_bytes.assign(L, layer.stored_bytes);
  for (int s = 0; s < p; ++s) {
    const sim::ChunkTime edge = sim::chunk_time(c, {0, s == 0, s == p - 1});
    const double in_flight = sim::in_flight_micro_batches(cfg.schedule, p, s, m, 1);
    in.stage_extra_time_s.push_back(edge.forward_s + edge.backward_s);
    in.stage_extra_bytes.push_back(states(s, 0) + memory(s, 1).workspace + in_flight * edge.stored_bytes);
    in.stage_in_flight.push_back(in_flight);
  }
  in.goal = goal;
  in.memory_weight = memory_weight;
  in.memory_cap_bytes = ev.cluster().hardware.device.memory_bytes * (1.0 - cfg.memory_headroom);
  return in;
}

std::optional<std::vector<int>> choose_partition(const sim::Evaluator& ev, const sim::ParallelConfig& cfg,
                                                 PartitionGoal goal, double memory_weight, bool empty_edges) {
  if (cfg.pp < 2 || cfg.virtual_stages != 1 || cfg.pp > ev.model().num_layers) return std::nullopt;
  PartitionInput in = partition_input(ev, cfg, goal, memory_weight);
  in.empty_edges = empty_edges;
  const PartitionResult r = auto_partition(in);
  if (!r.feasible) return std::nullopt;
  return r.layers_per_stage;
}

std::vector<int> default_split(int layers, int stages) {
  std::vector<int> part(stages, layers / stages);
  int extra = layers % stages;
  for (int s = 1; s < stages && extra > 0; ++s, --extra) ++part[s];
  for (int s = 0; extra > 0; ++s, --extra) ++part[s];
  return part;
}

}  // namespace shardplan::planner
