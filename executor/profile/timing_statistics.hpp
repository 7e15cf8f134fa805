#pragma once
// The statistics of the profile's timing samples. The upper median (for an even count the larger
// middle one): what the collective timings, the host-overhead timings and every merge of repeated
// passes report. The mean: what a kernel timing reports (kernel_bench.cpp: a step pays every call)
// and the skew benchmark averages (sync_skew.hpp: a step pays every stall).
#include <algorithm>
#include <vector>

namespace shardplan::executor {

inline double upper_median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The mean of `v` (0 for none).
inline double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(std::max<std::size_t>(1, v.size()));
}

}  // namespace shardplan::executor
