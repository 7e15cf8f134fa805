#pragma once
// Collective timings for `shardrun profile`: all-reduce, all-gather, reduce-scatter and
// send/recv over buffers of 64 B .. 256 MB on the world communicator, each the slowest rank's
// median seconds per call (profile.cpp writes them as the profile's link samples).
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "executor/comm/communicator.hpp"
#include "simulator/efficiency_fit.hpp"

namespace shardplan::executor {

struct LinkBenchOptions {
  bool quick = false;        // buffers up to 1 MB, short timings (tests)
  double min_time_s = 0.05;  // per collective and size
  // Bytes a CPU run sweeps before each timed call (0: none; GPUs). Profile: 2 x cold_cache_bytes().
  double cold_sweep_bytes = 0;
  std::function<bool()> stop_requested;  // collective; throws ProfileInterrupted between timings
  std::function<void(const std::string&)> progress;
};

// `before` (untimed, when set) then `call` (timed), over and over until at least 5 timed calls and
// `min_time_s` have passed on every rank: `more` agrees on another round (collective: true when
// any rank wants one; identity on one rank). Returns the median of this rank's timed calls.
double median_call_seconds(const std::function<void()>& call, const std::function<void()>& before, double min_time_s,
                           const std::function<bool(bool)>& more);

std::vector<simulator::LinkSample> bench_links(Communicator& comm, torch::Device dev, const LinkBenchOptions& o);

}  // namespace shardplan::executor
