// The launcher without MPI or LibTorch (also under ASan): exit classification, back-off, the
// supervisor (exit codes, deaths by signal, start failures, interrupts forwarded to the child's
// process group), and the whole relaunch loop against a fake mpirun that fails on cue.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "executor/launch/launch_policy.hpp"
#include "executor/launch/launcher.hpp"
#include "executor/launch/supervisor.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor::launch {
namespace launcher_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<nlohmann::json> read_events(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> kinds(const std::vector<nlohmann::json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["event"].get<std::string>());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(LaunchPolicy, ClassifiesExitsAndDeaths) {
  EXPECT_EQ(classify({0, 0, false}), Verdict::done);
  EXPECT_EQ(classify({2, 0, false}), Verdict::bad_input);
  EXPECT_EQ(classify({130, 0, false}), Verdict::interrupted);
  EXPECT_EQ(classify({1, 0, true}), Verdict::interrupted);
  for (int code : {1, 3, 4, 134, 137}) EXPECT_EQ(classify({code, 0, false}), Verdict::retry) << code;
  EXPECT_EQ(classify({0, SIGKILL, false}), Verdict::retry);
  EXPECT_EQ(classify({0, SIGSEGV, false}), Verdict::retry);
}

TEST(LaunchPolicy, BackoffDoublesUpToTheCap) {
  EXPECT_DOUBLE_EQ(backoff_seconds(1, 5, 100), 5);
  EXPECT_DOUBLE_EQ(backoff_seconds(2, 5, 100), 10);
  EXPECT_DOUBLE_EQ(backoff_seconds(3, 5, 100), 20);
  EXPECT_DOUBLE_EQ(backoff_seconds(6, 5, 100), 100);
  EXPECT_DOUBLE_EQ(backoff_seconds(1000, 5, 100), 100);
  EXPECT_DOUBLE_EQ(backoff_seconds(3, 0, 100), 0);
}

TEST(Supervisor, ReportsExitCodesSignalsAndStartFailures) {
  EXPECT_EQ(run_supervised({"sh", "-c", "exit 7"}, 1).code, 7);
  const ExitStatus killed = run_supervised({"sh", "-c", "kill -9 $$"}, 1);
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_EQ(killed.shell_code(), 137);
  EXPECT_NE(killed.describe().find("signal 9"), std::string::npos);
  try {
    run_supervised({"/nonexistent/mpirun"}, 1);
    FAIL() << "started a missing executable";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mpirun"), std::string::npos) << e.what();
  }
}

TEST(Supervisor, ForwardsAnInterruptToTheWholeProcessGroup) {
  TempDir dir("supervisor_sig");
  install_signal_handlers();
  reset_interrupt();
  const std::string ready = dir.file("ready"), child_got = dir.file("child_got");
  // The child starts a grandchild (as mpirun starts ranks); both must get the SIGTERM. The
  // grandchild says it is ready only once its own trap is set (the child's is set before it
  // starts). The child's trap exits 42 once the grandchild's file is there (written, then
  // renamed); were the grandchild never signalled, the child would be killed after the grace.
  const std::string g = child_got + ".g";
  const std::string script = "trap 'echo term > " + child_got + "; while [ ! -e " + g +
                             " ]; do sleep 0.01; done; exit 42' TERM; "
                             "sh -c 'trap \"echo gterm > " +
                             g + ".tmp; mv " + g + ".tmp " + g + "; exit 0\" TERM; touch " + ready +
                             "; while :; do sleep 0.05; done' & "
                             "while :; do sleep 0.05; done";
  std::thread interrupter([&] {
    while (!fs::exists(ready)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), SIGTERM);  // as Ctrl-C / scancel would
  });
  const ExitStatus st = run_supervised({"sh", "-c", script}, 10);
  interrupter.join();
  EXPECT_TRUE(st.interrupted);
  EXPECT_EQ(st.code, 42);
  EXPECT_EQ(classify(st), Verdict::interrupted);
  EXPECT_EQ(read_text(child_got), "term\n");
  EXPECT_EQ(read_text(g), "gterm\n");
  reset_interrupt();
}

// A fake mpirun: records each training attempt's arguments; training fails with FAIL_CODE for
// the first FAIL_TIMES attempts; the health check (`... shardrun health ...`) exits HEALTH_CODE
// for its first HEALTH_FAILS calls. Step checkpoints are faked as committed manifests.
class FakeMpirun : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_interrupt();
    script_ = dir_.file("fake-mpirun");
    std::ofstream(script_) << R"(#!/bin/bash
state=")" << dir_.file("state")
                           << R"("
mkdir -p "$state"
for a in "$@"; do if [ "$a" = health ]; then
  h=$(cat "$state/health" 2>/dev/null || echo 0); h=$((h + 1)); echo "$h" > "$state/health"
  if [ "$h" -le "${HEALTH_FAILS:-0}" ]; then exit 1; fi; exit 0; fi; done
n=$(cat "$state/count" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$state/count"
printf '%s\n' "$@" > "$state/args-$n"
ck=")" << dir_.file("ck") << R"("; step=$((n * 3)); d=$(printf '%s/step-%08d' "$ck" "$step")
mkdir -p "$d"; printf '{"schema": "shardplan.checkpoint/1", "step": %d, "shards": []}' "$step" > "$d/manifest.json"
if [ "$n" -le "${FAIL_TIMES:-0}" ]; then if [ "${FAIL_CODE:-1}" = kill ]; then kill -9 $$; fi; exit "${FAIL_CODE:-1}"; fi
exit 0
)";
    fs::permissions(script_, fs::perms::owner_all);
  }
  LaunchOptions options() const {
    LaunchOptions o;
    o.plan = "plan.json";
    o.ranks = 2;
    o.checkpoint_dir = dir_.file("ck");
    o.mpirun = {script_, "--oversubscribe"};
    o.shardrun = "/opt/shardrun";
    o.shardrun_args = {"--steps", "12", "--out-dir", "o u t"};
    o.backoff_s = 0;
    o.events = dir_.file("events.jsonl");
    o.quiet = true;
    return o;
  }
  static void set_env(const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); }
  void TearDown() override {
    for (const char* k : {"FAIL_TIMES", "FAIL_CODE", "HEALTH_FAILS"}) ::unsetenv(k);
  }
  TempDir dir_{"launcher_fake"};
  std::string script_;
};

TEST_F(FakeMpirun, RelaunchesAfterFailuresWithHealthChecksAndResumes) {
  set_env("FAIL_TIMES", "2");
  set_env("FAIL_CODE", "kill");  // the attempt dies by SIGKILL, as a rank killed with kill -9
  const LaunchOptions o = options();
  EXPECT_EQ(run_launcher(o), 0);
  const auto ev = read_events(o.events);
  EXPECT_EQ(kinds(ev), (std::vector<std::string>{"launch", "exit", "health", "relaunch", "launch", "exit", "health",
                                                 "relaunch", "launch", "exit", "done"}));
  EXPECT_TRUE(ev[0]["resume_step"].is_null());
  EXPECT_EQ(ev[1]["signal"], SIGKILL);
  EXPECT_EQ(ev[1]["verdict"], "retry");
  EXPECT_EQ(ev[2]["ok"], true);
  EXPECT_EQ(ev[3]["resume_step"], 3);  // what the dead attempt had committed
  EXPECT_EQ(ev[4]["resume_step"], 3);
  EXPECT_EQ(ev[7]["resume_step"], 6);
  EXPECT_EQ(ev[10]["restarts"], 2);
  const std::vector<std::string> expected = {
      "--oversubscribe", "-np",      "2",    "/opt/shardrun", "--plan", "plan.json", "--checkpoint-dir",
      o.checkpoint_dir,  "--resume", "auto", "--steps",       "12",     "--out-dir", "o u t"};
  std::string want;
  for (const auto& w : expected) want += w + "\n";
  EXPECT_EQ(read_text(dir_.file("state/args-3")), want);
}

TEST_F(FakeMpirun, BadInputIsNotRetried) {
  set_env("FAIL_TIMES", "5");
  set_env("FAIL_CODE", "2");
  const LaunchOptions o = options();
  EXPECT_EQ(run_launcher(o), 2);
  const auto ev = read_events(o.events);
  EXPECT_EQ(kinds(ev), (std::vector<std::string>{"launch", "exit", "give_up"}));
  EXPECT_EQ(ev[2]["reason"], "bad_input");
}

TEST_F(FakeMpirun, GivesUpAfterMaxRestartsWithTheFailureCode) {
  set_env("FAIL_TIMES", "100");
  set_env("FAIL_CODE", "4");
  LaunchOptions o = options();
  o.max_restarts = 2;
  o.health_check = false;
  EXPECT_EQ(run_launcher(o), 4);
  const auto ev = read_events(o.events);
  EXPECT_EQ(kinds(ev), (std::vector<std::string>{"launch", "exit", "relaunch", "launch", "exit", "relaunch", "launch",
                                                 "exit", "give_up"}));
  EXPECT_EQ(ev.back()["reason"], "max_restarts");
  EXPECT_EQ(read_text(dir_.file("state/count")), "3\n");
}

TEST_F(FakeMpirun, AFailedHealthCheckCountsAsARestartAndIsRetried) {
  set_env("FAIL_TIMES", "1");
  set_env("FAIL_CODE", "1");
  set_env("HEALTH_FAILS", "1");
  LaunchOptions o = options();
  o.max_restarts = 3;
  EXPECT_EQ(run_launcher(o), 0);
  const auto ev = read_events(o.events);
  EXPECT_EQ(kinds(ev),
            (std::vector<std::string>{"launch", "exit", "health", "health", "relaunch", "launch", "exit", "done"}));
  EXPECT_EQ(ev[2]["ok"], false);
  EXPECT_EQ(ev[3]["ok"], true);
  EXPECT_EQ(ev[4]["restart"], 2);
  // ... and with no restarts left after the failed check, it gives up with exit 1.
  fs::remove_all(dir_.file("state"));
  set_env("HEALTH_FAILS", "5");
  o.max_restarts = 1;
  o.events = dir_.file("events2.jsonl");
  EXPECT_EQ(run_launcher(o), 1);
  EXPECT_EQ(kinds(read_events(o.events)), (std::vector<std::string>{"launch", "exit", "health", "give_up"}));
}

TEST_F(FakeMpirun, AMissingMpirunIsNotRetried) {
  LaunchOptions o = options();
  o.mpirun = {dir_.file("no-such-mpirun")};
  EXPECT_EQ(run_launcher(o), 127);
  const auto ev = read_events(o.events);
  EXPECT_EQ(kinds(ev), (std::vector<std::string>{"launch", "give_up"}));
  EXPECT_EQ(ev[1]["reason"], "cannot_start");
  EXPECT_NE(ev[1]["error"].get<std::string>().find("no-such-mpirun"), std::string::npos);
}

TEST_F(FakeMpirun, BadOptionsAreRejectedBeforeAnythingRuns) {
  LaunchOptions o = options();
  o.checkpoint_dir.clear();
  EXPECT_THROW(run_launcher(o), std::invalid_argument);
  o = options();
  o.max_restarts = -1;
  EXPECT_THROW(run_launcher(o), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_.file("state/count")));
}

}  // namespace launcher_test
}  // namespace shardplan::executor::launch
