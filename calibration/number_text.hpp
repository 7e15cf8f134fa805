#pragma once
// One number in printf form (e.g. "%.4g"), for the calibration's notes, descriptions and source lines.
#include <cstdio>
#include <string>

namespace shardplan::calibration {

inline std::string num(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace shardplan::calibration
