#pragma once
// The wait a synchronous step pays beyond its slowest rank, from the profile's skew benchmark
// (profile.cpp, bench_sync_skew): per rank, the mean seconds of a compute phase alone, of the phase
// followed by a one-element all-reduce, and of the all-reduce alone.
#include <algorithm>
#include <vector>

#include "timing_statistics.hpp"

namespace shardplan::executor {

struct SyncSkew {
  double fraction = 0;  // (phase + all-reduce) - slowest rank's phase - all-reduce, over that phase
  double rank_gap = 0;  // the slowest rank's mean phase over the fastest's, minus 1
};

// Every kernel of the profile is the slowest rank's (ctx.combine: MPI_MAX), so a rank that is slower
// throughout is already in them; what a step waits beyond that is the random part, E[max of the
// phases] - max of E[phase]. Per-rank vectors, one entry per rank, all the same size (>= 1).
inline SyncSkew sync_skew_of(const std::vector<double>& alone, const std::vector<double>& together,
                             const std::vector<double>& reduce_alone) {
  const double slowest = *std::max_element(alone.begin(), alone.end());
  const double fastest = *std::min_element(alone.begin(), alone.end());
  const double wait = mean_of(together) - slowest - mean_of(reduce_alone);
  return {std::max(0.0, wait / slowest), slowest / fastest - 1};
}

}  // namespace shardplan::executor
