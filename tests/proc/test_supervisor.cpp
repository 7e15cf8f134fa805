// The one subprocess supervisor (proc/supervisor.hpp) as `shardplan validate` uses it: output
// into a file, stdin from /dev/null, a deadline and a cancel flag that stop the child (SIGTERM,
// then SIGKILL to its group after the grace), and a start failure named.
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "proc/supervisor.hpp"

namespace shardplan::proc {
namespace supervisor_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("shardplan_proc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Supervisor, WritesBothStreamsIntoTheOutputFileWithNoInput) {
  ChildOptions o;
  o.output_path = temp_path("out.log");
  o.stdin_null = true;
  // `cat` with /dev/null as stdin ends at once; inherited stdin would wait.
  const ExitStatus st = run({"sh", "-c", "echo out; echo err >&2; cat; exit 3"}, o);
  EXPECT_EQ(st.code, 3);
  EXPECT_FALSE(st.timed_out || st.cancelled || st.interrupted);
  EXPECT_EQ(read_text(o.output_path), "out\nerr\n");
}

TEST(Supervisor, ADeadlineStopsTheChild) {
  ChildOptions o;
  o.timeout_s = 0.3;
  o.grace_s = 5;
  const auto t0 = std::chrono::steady_clock::now();
  const ExitStatus st = run({"sleep", "30"}, o);
  EXPECT_TRUE(st.timed_out);
  EXPECT_EQ(st.signal, SIGTERM);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
}

TEST(Supervisor, ACancelIgnoredByTheChildEndsInSigkillAfterTheGrace) {
  std::atomic<bool> cancel{false};
  ChildOptions o;
  o.cancel = &cancel;
  o.grace_s = 0.2;
  o.terminate_group = false;
  const std::string ready = temp_path("ready");
  fs::remove(ready);
  std::thread canceller([&] {
    while (!fs::exists(ready)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancel = true;
  });
  const ExitStatus st = run({"sh", "-c", "trap '' TERM; touch " + ready + "; while :; do sleep 0.05; done"}, o);
  canceller.join();
  EXPECT_TRUE(st.cancelled);
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_EQ(st.shell_code(), 137);
}

TEST(Supervisor, AMissingCommandIsAStartError) {
  ChildOptions o;
  o.output_path = temp_path("missing.log");
  try {
    (void)run({"/nonexistent/mpirun", "-np", "2"}, o);
    FAIL() << "started a missing executable";
  } catch (const StartError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mpirun"), std::string::npos) << e.what();
  }
}

}  // namespace supervisor_test
}  // namespace shardplan::proc
