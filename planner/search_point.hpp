#pragma once
// Internal to the search: one evaluated point, small and copyable without allocation.
#include <string>
#include <vector>

#include "search.hpp"

namespace shardplan::planner::detail {

// Everything that identifies a configuration, as integers; the members' order is the tie-break
// (lexicographic, by declaration order). Enums are held as their underlying values.
struct PointKey {
  int nodes = 0, tp = 0, pp = 0, dp = 0;
  int zero = 0, shard = 0;  // ZeRO stage, sharding group (dp unless MiCS)
  int gbs = 0, mbs = 0;     // global batch (sequences), micro-batch size
  int schedule = 0, virtual_stages = 0, recompute = 0;
  int sp = 0, offload_optimizer = 0, offload_activations = 0;  // 0 or 1
  int precision = 0, fp8 = 0;
  int cp = 0, ep = 0, etp = 0;
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
