#include "paths.hpp"

#include <cstdlib>

namespace shardplan::simulator {

std::string data_dir() {
  if (const char* env = std::getenv("SHARDPLAN_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return SHARDPLAN_SOURCE_DATA_DIR;
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.ends_with(".json"));
}

}  // namespace shardplan::simulator
