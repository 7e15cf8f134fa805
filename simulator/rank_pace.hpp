#pragma once
// A job's compute pace against a measured profile's kernels.
// Legend: n ranks profiled at once on a node, g = rank_speed_gap_fraction (the slowest profiled
// rank's time for the same work / the fastest's - 1), k = the job's ranks on a node.
// `shardrun profile` times every kernel on all n ranks at once and keeps the slowest rank's time,
// because a synchronous step waits for its slowest rank. A job on k < n of the node's cores
// waits for the slowest of its k: with the n ranks' times spread evenly over [1, 1 + g], the
// expected slowest of k drawn without replacement is 1 + g (k (n + 1) / (k + 1) - 1) / (n - 1)
// (the maximum of k draws without replacement from {1..n} has mean k (n + 1) / (k + 1));
// k = n gives 1 + g (the kernels as they are), k = 1 the mean rank.
#include <algorithm>

namespace shardplan::simulator {

// The factor on the job's rank-local time (compute, host, optimizer): <= 1, 1 when k >= n or g = 0.
inline double rank_pace(double gap, int profiled_ranks, int job_ranks) {
  const int n = profiled_ranks, k = std::max(1, job_ranks);
  if (!(gap > 0) || n < 2 || k >= n) return 1.0;
  const double slowest_of_k = 1.0 + gap * (k * (n + 1.0) / (k + 1.0) - 1.0) / (n - 1.0);
  return slowest_of_k / (1.0 + gap);
}

}  // namespace shardplan::simulator
