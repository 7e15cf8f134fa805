#pragma once
// The upper median of timing samples (for an even count the larger middle one): the statistic
// every timing loop and every merge of repeated passes in the profile reports.
#include <algorithm>
#include <vector>

namespace shardplan::executor {

inline double upper_median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace shardplan::executor
