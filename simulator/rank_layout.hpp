#pragma once
// Rank layout: where each parallel group's members sit on the cluster. One source of truth:
// the order string (fastest-varying dimension first, e.g. "tp-dp-pp" as in Megatron core), so
// rank = tp_rank + tp * (dp_rank + dp * pp_rank) for "tp-dp-pp".
#include <array>
#include <string>

namespace shardplan::simulator {

enum class Dim { tp = 0, dp = 1, pp = 2 };

struct GroupPlacement {
  int size = 1;            // ranks in the group
  int nodes = 1;           // nodes the group spans
  int ranks_per_node = 1;  // group members on each of those nodes
  [[nodiscard]] bool intra_node() const { return nodes == 1; }
};

class RankLayout {
 public:
  // Throws InputError unless `order` is a permutation of tp, dp, pp joined by '-'.
  RankLayout(const std::string& order, int tp, int dp, int pp, int devices_per_node);

  [[nodiscard]] int stride(Dim d) const { return stride_[static_cast<int>(d)]; }
  [[nodiscard]] int size(Dim d) const { return size_[static_cast<int>(d)]; }
  // The group of dimension d containing rank 0; `members` <= size(d) takes a sub-group (MiCS
  // sharding group), `every` > 1 takes every k-th member (MiCS replication group).
  [[nodiscard]] GroupPlacement group(Dim d, int members = 0, int every = 1) const;
  // Whether pipeline stage s and s+1 of rank 0's pipeline live on different nodes.
  [[nodiscard]] bool pp_hop_crosses_nodes(int stage) const;

 private:
  std::array<int, 3> size_{};
  std::array<int, 3> stride_{};
  int per_node_ = 1;
};

}  // namespace shardplan::simulator
