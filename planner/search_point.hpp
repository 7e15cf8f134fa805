#pragma once
// Internal to the search: one evaluated point, small and copyable without allocation.
#include <array>
#include <string>
#include <vector>

#include "search.hpp"

namespace shardplan::planner::detail {

// Everything that identifies a configuration, as integers (lexicographic order = tie-break).
struct PointKey {
  std::array<int, 19> v{};  // nodes, tp, pp, dp, zero, shard, gbs, mbs, schedule, virtual,
                            // recompute, sp, offload_opt, offload_act, precision, fp8, cp, ep, etp
  auto operator<=>(const PointKey&) const = default;
};

struct Point {
  int node_index = 0;
  PointKey key;
  simulator::Estimate estimate;
  double score = 0;
  double usd_per_token = 0;
  double time_per_token = 0;
};

inline bool better(const Point& a, const Point& b) {
  if (a.score != b.score) return a.score < b.score;
  return a.key < b.key;
}

// Writes the point's scalars into `cfg` (lists such as LoRA targets and partition untouched).
void apply(const PointKey& k, simulator::ParallelConfig& cfg);
PointKey key_of(const simulator::ParallelConfig& cfg, int nodes);

}  // namespace shardplan::planner::detail
