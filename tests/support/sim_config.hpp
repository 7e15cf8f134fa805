#pragma once
// Shared helpers for the simulator and planner tests: clusters and configurations in one line.
#include "simulator/evaluator.hpp"

namespace shardplan::testing {

namespace sim = shardplan::simulator;

inline sim::ClusterSpec cluster(const char* hw, int nodes) {
  return sim::ClusterSpec{sim::load_hardware(hw), nodes, 0};
}

// dp defaults to what is left of the cluster after tp x pp.
inline sim::ParallelConfig config(const sim::ClusterSpec& c, int tp, int pp, int zero, int mbs, int gbs, int seq) {
  sim::ParallelConfig cfg;
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = c.devices() / (tp * pp);
  cfg.zero_stage = zero;
  cfg.micro_batch_size = mbs;
  cfg.global_batch_size = gbs;
  cfg.seq_len = seq;
  return cfg;
}

inline sim::Prediction run(const sim::ModelSpec& m, const sim::ClusterSpec& c, sim::ParallelConfig cfg) {
  return sim::simulate(m, c, cfg);
}

// Weight elements of one block's linears on one tp rank.
inline double linear_weights(const sim::ModelSpec& m, int tp) {
  double w = 0;
  for (const sim::LinearDesc& lin : m.block_linears()) w += static_cast<double>(lin.d_in) * lin.d_out / tp;
  return w;
}

inline double model_states(const sim::MemoryBreakdown& m) { return m.parameters + m.gradients + m.optimizer_states; }

}  // namespace shardplan::testing
