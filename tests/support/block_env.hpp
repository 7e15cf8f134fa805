#pragma once
// One transformer block's cost environment on one tensor-parallel rank, for tests of the layer
// cost model (attention kinds, MLA, frozen inputs, fusion): a model, a one-node cluster, the
// block's linears.
#include <utility>
#include <vector>

#include "simulator/layer_cost.hpp"
#include "support/sim_config.hpp"

namespace shardplan::testing {

// The stored-activation bytes of one block on one tp rank, for one attention kind.
struct BlockEnv {
  sim::ModelSpec m;
  sim::ClusterSpec c;
  std::vector<sim::LinearDesc> linears;
  std::vector<char> mask;
  BlockEnv(const char* model, const char* hw) : BlockEnv(sim::load_model(model), hw) {}
  BlockEnv(sim::ModelSpec model, const char* hw) : m(std::move(model)), c(cluster(hw, 1)) {
    linears = m.block_linears();
    mask.assign(linears.size(), 0);
  }
  // The block under `cfg` as given (its tp, sequence, micro-batch, kinds, LoRA; `mask` marks the
  // adapted linears).
  sim::CostEnv env(const sim::ParallelConfig& cfg) const {
    return sim::make_cost_env(m, c, cfg, linears, mask,
                              sim::BlockGroups{sim::GroupPlacement{cfg.tp, 1, cfg.tp}, {}, {}, {}});
  }
  sim::CostEnv env(sim::AttentionKind kind, int tp, int s, int b, sim::Recompute r = sim::Recompute::none) const {
    sim::ParallelConfig cfg;
    cfg.tp = tp;
    cfg.seq_len = s;
    cfg.micro_batch_size = b;
    cfg.recompute = r;
    cfg.attention = kind;
    return env(cfg);
  }
  double bytes(sim::AttentionKind kind, int tp, int s, int b, sim::Recompute r = sim::Recompute::none) const {
    return sim::block_activation_bytes(env(kind, tp, s, b, r), r);
  }
  double bytes(const sim::ParallelConfig& cfg) const { return sim::block_activation_bytes(env(cfg), cfg.recompute); }
};

}  // namespace shardplan::testing
