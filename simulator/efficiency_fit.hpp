#pragma once
// Fits of measured kernel and link samples, for profiles written by `shardrun profile` and for
// calibration: an efficiency curve (fraction of the best measured rate as a function of size)
// and the latency-bandwidth (alpha-beta) model of a link. Least squares with Eigen.
#include <array>
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
CurveFit fit_efficiency_curve(const std::vector<EfficiencySample>& samples, bool monotone, int points_per_decade = 2);

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

// A GEMM's operands that stream from DRAM as the BLAS packs them: those larger than the rank's
// share of the last-level cache (a cache share of 0: all of them). Smaller cold operands cost
// the packing no measurable time here: on the 2-vCPU Zen 5 VM the profile's 64-1024 cube grid
// (operands <= 4 MB, taken cold from a 64 MB pool) ran at up to 114 GFLOP/s with its bytes at
// the streamed rate making up a third of its time, which would leave its FMAs faster than any
// GEMM's (profile of 2026-11-28). `operand_bytes`: A (m x k), B (k x n), C (m x n).
double streamed_operand_bytes(const std::array<double, 3>& operand_bytes, double cache_share_bytes);

// One timed GEMM (m x k) @ (k x n): 2mnk FLOP, its streamed operand bytes.
struct GemmSample {
  double flops = 0;
  double streamed_bytes = 0;
  double seconds = 0;  // launch cost taken out
};

struct GemmStreamFit {
  double flop_rate = 0;   // FLOP/s of the FMAs alone
  double stream_Bps = 0;  // streamed bytes/s; 0 = no byte dependence to fit
  double rms_relative_error = 0;
};

// t = F / R + streamed bytes / B_stream: a CPU BLAS packs the panels of its operands into
// contiguous buffers between its FMA loops (Goto & van de Geijn 2008, "Anatomy of
// High-Performance Matrix Multiplication", ACM TOMS 34(3), Sec. 4), so on one thread an operand
// streamed from DRAM adds to the FMAs' time rather than hide under it. Fitted as fit_link is
// (relative errors, both terms >= 0).
GemmStreamFit fit_gemm_stream(const std::vector<GemmSample>& samples);

}  // namespace shardplan::simulator
