#pragma once
// Shared by the fuzz targets of readers that take a path (safetensors, token caches, checkpoint
// directories, JSONL datasets): each input is written to a file in a scratch directory of this
// process (in /dev/shm where there is one, so the file system costs little), which is removed
// at exit. A user-facing InputError is the expected end of bad input; anything else that escapes
// is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "simulator/errors.hpp"

namespace shardplan::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("shardplan-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes the input to <scratch>/<name> (replacing it) and returns the path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return p.string();
}

// Writes the input to <scratch>/<name> and hands its path to `read`; an InputError ends it.
template <class Reader>
int run_file_reader(const std::string& name, const uint8_t* data, size_t size, Reader&& read) {
  const std::string path = write_input(name, data, size);
  try {
    read(path);
  } catch (const simulator::InputError&) {}
  return 0;
}

}  // namespace shardplan::fuzz
