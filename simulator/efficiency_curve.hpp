#pragma once
#include <vector>

namespace shardplan::simulator {

// Piecewise-linear in log10(x), clamped at both ends: efficiency (0, 1] of a kernel as a
// function of its size (FLOP for GEMMs, bytes for memory-bound ops); also used for other
// figures by size (bus bandwidth by bytes, an op's seconds per element by elements).
struct EfficiencyCurve {
  std::vector<double> log10_x;  // ascending
  std::vector<double> efficiency;
  [[nodiscard]] double at(double x) const;  // allocation-free
};

}  // namespace shardplan::simulator
