#pragma once
// Finding the processes of one test's run in /proc (to kill -9 a rank, or signal the launcher).
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace shardplan::testing {

// The pid of a process running `binary` (argv[0] exactly) whose command line contains `tag`
// and, when `env` is not empty, whose environment holds that NAME=VALUE; -1 if none.
inline pid_t find_process(const std::string& binary, const std::string& tag, const std::string& env = "") {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(it->path() / "cmdline");
    const std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.rfind(binary + '\0', 0) != 0 || args.find(tag) == std::string::npos) continue;
    if (env.empty()) return static_cast<pid_t>(std::stoi(name));
    std::ifstream e(it->path() / "environ");
    const std::string vars((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    if (('\0' + vars).find('\0' + env + '\0') != std::string::npos) return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

}  // namespace shardplan::testing
