#pragma once
// The executor's one 64-bit mixing function: the splitmix64 finaliser (Steele, Lea & Flood 2014,
// "Fast splittable pseudorandom number generators"). Seeds of parameter inits, dropout
// generators and synthetic samples are derived with it, so they are portable and layout-free.
#include <cstdint>

namespace shardplan::executor {

inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

inline uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// One splitmix64 step from state x.
inline uint64_t splitmix64(uint64_t x) { return splitmix64_finalize(x + kGoldenGamma); }

}  // namespace shardplan::executor
