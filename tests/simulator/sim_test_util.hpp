#pragma once
// Shared helpers for the simulator tests: build validated configurations quickly.
#include "simulator/evaluator.hpp"

namespace shardplan::simulator::testing {

inline ClusterSpec cluster(const char* hw, int nodes) { return ClusterSpec{load_hardware(hw), nodes, 0}; }

// dp defaults to what is left of the cluster after tp x pp.
inline ParallelConfig config(const ClusterSpec& c, int tp, int pp, int zero, int mbs, int gbs, int seq) {
  ParallelConfig cfg;
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = c.devices() / (tp * pp);
  cfg.zero_stage = zero;
  cfg.micro_batch_size = mbs;
  cfg.global_batch_size = gbs;
  cfg.seq_len = seq;
  return cfg;
}

inline Prediction run(const ModelSpec& m, const ClusterSpec& c, ParallelConfig cfg) {
  return simulate(m, c, cfg);
}

inline double model_states(const MemoryBreakdown& m) { return m.parameters + m.gradients + m.optimizer_states; }

}  // namespace shardplan::simulator::testing
