#pragma once
// Fits of measured kernel and link samples, for profiles written by `shardrun profile` and for
// calibration: an efficiency curve (fraction of the best measured rate as a function of size)
// and the latency-bandwidth (alpha-beta) model of a link. Least squares with Eigen.
#include <string>
#include <vector>

#include "hardware_profile.hpp"

namespace shardplan::simulator {

// One measured kernel: `size` is FLOP (GEMMs) or bytes moved (memory-bound ops); `efficiency`
// the achieved fraction of the device's best rate.
struct EfficiencySample {
  double size = 0;
  double efficiency = 0;
};

struct CurveFit {
  EfficiencyCurve curve;
  double rms_residual = 0;  // of the samples around the fitted curve (efficiency units)
  int degree = 0;
};

// Least-squares polynomial in log10(size) (degree <= 3, lower when the samples span few
// distinct sizes), sampled at `points_per_decade` over the samples' range and clamped to
// [0.005, 1]; `monotone` makes it non-decreasing (GEMMs get no slower per FLOP as they grow).
// InputError when there are no samples.
CurveFit fit_efficiency_curve(const std::vector<EfficiencySample>& samples, bool monotone,
                              int points_per_decade = 2);

// One timed collective: `hops` latency-bound steps and `wire_bytes` each rank sends on the
// busiest link (ring algorithms: all-reduce 2(n-1) hops and 2(n-1)/n * S; all-gather and
// reduce-scatter (n-1) and (n-1)/n * S; send/recv 1 and S).
struct LinkSample {
  std::string op;
  double bytes = 0;  // the buffer size S
  double hops = 0;
  double wire_bytes = 0;
  double seconds = 0;
};

struct LinkFit {
  double latency_s = 0;
  double bandwidth_Bps = 0;
  double rms_relative_error = 0;
};

// t = hops * alpha + wire_bytes / B (Hockney 1994, the alpha-beta model), fitted by least
// squares on relative errors (each row divided by its measured time) with alpha, 1/B >= 0.
LinkFit fit_link(const std::vector<LinkSample>& samples);

}  // namespace shardplan::simulator
