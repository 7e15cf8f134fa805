#pragma once
// Helpers of the `shardplan` CLI tests: run the real binary as a subprocess, read its JSON, the
// built-in names the listings must show. Shared by the CLI test files (the helpers are inline).
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "support/temp_dir.hpp"

namespace shardplan::testing::cli {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Subprocess helper
// ---------------------------------------------------------------------------------------------

struct RunResult {
  int exit_code = -1;  // exit status; 128 + signal number if killed by a signal
  bool signaled = false;
  std::string out, err;
};

inline std::ostream& operator<<(std::ostream& os, const RunResult& r) {
  return os << "exit code " << r.exit_code << (r.signaled ? " (signal)" : "") << "\n--- stdout ---\n"
            << r.out << "\n--- stderr ---\n"
            << r.err << "\n--------------";
}

inline std::string describe(const std::vector<std::string>& args) {
  std::string s = "shardplan";
  for (const auto& a : args) s += " " + a;
  return s;
}

// Runs SHARDPLAN_BINARY with `args`, capturing stdout and stderr separately (polling both pipes so
// that a large output on one cannot deadlock the other).
inline RunResult run_shardplan(const std::vector<std::string>& args) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    ADD_FAILURE() << "pipe() failed: " << std::strerror(errno);
    return {};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork() failed: " << std::strerror(errno);
    return {};
  }
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[0]);
    close(err_pipe[1]);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    std::vector<char*> argv;
    std::string bin = SHARDPLAN_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.exit_code = 128 + WTERMSIG(status);
  }
  return r;
}

inline RunResult run_shardplan(std::initializer_list<std::string> args) {
  return run_shardplan(std::vector<std::string>(args));
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

inline std::string repo_root() {
  if (const char* env = std::getenv("SHARDPLAN_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return (fs::path(SHARDPLAN_TEST_DATA_DIR) / ".." / "..").lexically_normal().string();
}

inline std::string test_data(const std::string& rel) { return std::string(SHARDPLAN_TEST_DATA_DIR) + "/" + rel; }

inline json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return json::parse(in, nullptr, true, /*ignore_comments=*/true);
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A bad-input run: exit code 2, stdout empty, stderr exactly one line naming every one of
// `must_name` and saying what was expected, and no sign of a crash or a stack trace.
inline void expect_one_line_error(const std::vector<std::string>& args, const std::vector<std::string>& must_name,
                                  bool must_say_expected = true) {
  SCOPED_TRACE(describe(args));
  const RunResult r = run_shardplan(args);
  EXPECT_FALSE(r.signaled) << r;
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(r.out, "") << "bad input must print nothing on stdout\n" << r;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be exactly one line\n" << r;
  ASSERT_FALSE(r.err.empty()) << r;
  EXPECT_EQ(r.err.back(), '\n') << "the error line must end with a newline\n" << r;
  EXPECT_TRUE(r.err.rfind("shardplan: error: ", 0) == 0) << "expected a 'shardplan: error: ' line\n" << r;
  for (const char* crash :
       {"internal error", "terminate called", "what():", "Aborted", "Segmentation", "#0 ", "[json.exception"})
    EXPECT_FALSE(contains(r.err, crash)) << "looks like a crash or a stack trace: '" << crash << "'\n" << r;
  for (const auto& name : must_name)
    EXPECT_TRUE(contains(r.err, name)) << "the error line should name '" << name << "'\n" << r;
  if (must_say_expected) {
    EXPECT_TRUE(contains(r.err, "expected")) << "the error line should say what was expected\n" << r;
  }
}

// Runs and parses `--json` output; fails the test (fatally for the caller via ASSERT_*) on error.
inline json run_json(const std::vector<std::string>& args) {
  SCOPED_TRACE(describe(args));
  const RunResult r = run_shardplan(args);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "") << "a successful run should print nothing on stderr\n" << r;
  json j;
  try {
    j = json::parse(r.out);
  } catch (const json::parse_error& e) {
    ADD_FAILURE() << "stdout is not valid JSON: " << e.what() << "\n" << r;
    return json();
  }
  return j;
}

using shardplan::testing::TempDir;

inline json builtin_profile(const std::string& name) {
  return read_json(repo_root() + "/hardware_profiles/" + name + ".json");
}
inline json builtin_model(const std::string& name) { return read_json(repo_root() + "/models/" + name + ".json"); }

inline const std::vector<std::string> kBuiltinModels = {
    "bert-large",    "gpt-j-6b",        "gpt-neox-20b", "gpt2",        "gpt2-xl",        "gpt3-175b",
    "llama2-13b",    "llama2-70b",      "llama2-7b",    "llama3.1-8b", "llama3.1-70b",   "llama3.1-405b",
    "mistral-7b",    "qwen3-8b",        "tiny-gpt",     "tiny-llama",  "tinyllama-1.1b", "mixtral-8x7b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3",  "tiny-moe"};
inline const std::vector<std::string> kBuiltinHardware = {"local-cpu-2core",  "p4d.24xlarge",
                                                          "p4de.24xlarge",    "p5.48xlarge",
                                                          "p5e.48xlarge",     "p5en.48xlarge",
                                                          "p6-b200.48xlarge", "g5.48xlarge",
                                                          "trn1.32xlarge",    "trn1.32xlarge-neuroncore",
                                                          "trn2.48xlarge",    "trn2.48xlarge-neuroncore",
                                                          "gaudi2-hls2",      "gaudi3-hls3"};
// The 2026 instance types: datasheet profiles no published run is fitted to.
inline const std::vector<std::string> kUncalibrated2026Hardware = {"p5en.48xlarge", "p6-b200.48xlarge", "trn2.48xlarge",
                                                                   "trn2.48xlarge-neuroncore", "gaudi3-hls3"};

}  // namespace shardplan::testing::cli
