#pragma once
// Runs a shell command for a test: /bin/sh (popen), stdout and stderr captured together.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace shardplan::testing {

struct CommandResult {
  int status = -1;  // exit code; -1 if the shell could not start or was ended by a signal
  std::string out;
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace shardplan::testing
