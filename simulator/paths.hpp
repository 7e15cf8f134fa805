#pragma once
#include <string>

namespace shardplan::simulator {
// Directory holding models/ and hardware_profiles/: $SHARDPLAN_DATA_DIR, else the source
// tree this binary was built from.
std::string data_dir();
// True when `s` looks like a path rather than a built-in name.
bool looks_like_path(const std::string& s);
}  // namespace shardplan::simulator
