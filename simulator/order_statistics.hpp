#pragma once
// Expected maximum of n independent standard normal variables (Tippett 1925; order statistics
// of the normal), tabulated at n = 2^k by numerical integration and interpolated in log2 n.
#include <algorithm>
#include <cmath>

namespace shardplan::simulator {

inline double expected_max_normal(int n) {
  static constexpr double kTable[] = {0.0,    0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3437, 2.5946, 2.8269,
                                      3.0439, 3.2482, 3.4418, 3.6261, 3.8023, 3.9714, 4.1341, 4.2911};
  if (n <= 1) return 0.0;
  const double k = std::min(std::log2(static_cast<double>(n)), 16.0);
  const int lo = static_cast<int>(std::floor(k)), hi = std::min(lo + 1, 16);
  return kTable[lo] + (k - lo) * (kTable[hi] - kTable[lo]);
}

}  // namespace shardplan::simulator
