#pragma once
// Rank layout: where each parallel group's members sit on the cluster. One source of truth:
// the order string (fastest-varying dimension first, e.g. "tp-cp-dp-pp" as in Megatron core), so
// rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)) for "tp-cp-dp-pp". An order
// without cp places it right after tp (Megatron-Core's default "tp-cp-ep-dp-pp").
// Expert layers regroup a pipeline stage's ranks (Megatron-Core "parallel folding"): taken in rank
// order, etp consecutive ranks form an expert-tensor group, ep such groups an expert-parallel
// group, and the rest replicate the experts (expert data parallel).
#include <array>
#include <string>
#include <vector>

namespace shardplan::simulator {

enum class Dim { tp = 0, dp = 1, pp = 2, cp = 3 };
enum class ExpertDim { etp, ep, edp };

struct GroupPlacement {
  int size = 1;            // ranks in the group
  int nodes = 1;           // nodes the group spans
  int ranks_per_node = 1;  // group members on each of those nodes
  [[nodiscard]] bool intra_node() const { return nodes == 1; }
};

class RankLayout {
 public:
  // Throws InputError unless `order` is a permutation of tp, dp, pp (and optionally cp) joined by '-'.
  RankLayout(const std::string& order, int tp, int cp, int dp, int pp, int devices_per_node);
  RankLayout(const std::string& order, int tp, int dp, int pp, int devices_per_node)
      : RankLayout(order, tp, 1, dp, pp, devices_per_node) {}

  [[nodiscard]] int stride(Dim d) const { return stride_[static_cast<int>(d)]; }
  [[nodiscard]] int size(Dim d) const { return size_[static_cast<int>(d)]; }
  // The group of dimension d containing rank 0; `members` <= size(d) takes a sub-group (MiCS
  // sharding group), `every` > 1 takes every k-th member (MiCS replication group).
  [[nodiscard]] GroupPlacement group(Dim d, int members = 0, int every = 1) const;
  // Rank 0's data-parallel group with context parallelism: `dp_members` of dp (every
  // `dp_every`-th) times all cp ranks (Megatron's data-parallel group with CP).
  [[nodiscard]] GroupPlacement dp_cp_group(int dp_members = 0, int dp_every = 1) const;
  // Rank 0's expert group of kind `d` under folding with expert tensor parallel `etp` and expert
  // parallel `ep` (etp x ep divides tp x cp x dp).
  [[nodiscard]] GroupPlacement expert_group(ExpertDim d, int etp, int ep) const;
  // Whether pipeline stage s and s+1 of rank 0's pipeline live on different nodes.
  [[nodiscard]] bool pp_hop_crosses_nodes(int stage) const;
  // Whether the first and the last pipeline stage of rank 0's pipeline live on different nodes.
  [[nodiscard]] bool pp_ends_cross_nodes() const;

 private:
  [[nodiscard]] GroupPlacement placement(const std::vector<int>& ranks) const;
  // Whether pipeline stages a and b of rank 0's pipeline live on different nodes.
  [[nodiscard]] bool stages_on_different_nodes(int a, int b) const;
  std::array<int, 4> size_{};
  std::array<int, 4> stride_{};
  int per_node_ = 1;
};

}  // namespace shardplan::simulator
