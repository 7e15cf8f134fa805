// Faults in real runs of shardrun (2 ranks, tiny-llama, ZeRO-2 over dp 2, 12 steps, a
// checkpoint every 3):
//   - kill -9 (external SIGKILL of the rank's pid) of a seeded random rank at a seeded random
//     step while shardrun-launch supervises: the launcher health-checks, relaunches from the
//     last checkpoint, and the run ends with the uninterrupted run's losses, bit for bit;
//   - SIGKILL during a checkpoint write (--inject-fault ckptkill): the previous checkpoint stays
//     intact and is the one the relaunch resumes from;
//   - a corrupted shard (bytes flipped, size unchanged) in the latest checkpoint: --resume auto
//     names the file, skips it and resumes from the one before;
//   - SIGTERM to the launcher: forwarded, shardrun checkpoints at the step boundary, no relaunch;
//   - shardrun takes the plan's checkpoint interval when --checkpoint-every is not given;
//   - a run killed and resumed twice keeps all three attempts in metrics.jsonl and report.json;
//   - a rank that stops making progress outside any collective (--inject-fault stall) is ended by
//     the progress watchdog (exit 75) and the launcher resumes the job.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "executor/harness.hpp"
#include "executor/io/checkpoint_store.hpp"
#include "processes.hpp"

namespace shardplan::testing {
namespace run_faults_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSteps = 12;
constexpr int kEvery = 3;

// The harness's shardrun() adds --threads 1 --quiet itself; the launcher passes kLaunched.
const std::string kTraining = "--steps 12 --lr 1e-3";
const std::string kLaunched = " " + kTraining + " --threads 1 --quiet";

std::vector<nlohmann::json> jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The lines of metrics.jsonl written by one attempt (every attempt appends; run_history.hpp).
std::vector<nlohmann::json> attempt_lines(const std::vector<nlohmann::json>& lines, int attempt) {
  std::vector<nlohmann::json> out;
  for (const auto& l : lines)
    if (l.value("attempt", 0) == attempt) out.push_back(l);
  return out;
}

size_t lines_of(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

std::string launcher(const std::string& plan, const std::string& ck, const std::string& out_dir,
                     const std::string& extra = "") {
  return std::string("timeout 600 ") + SHARDRUN_LAUNCH_BINARY + " --plan " + quote(plan) + " --checkpoint-dir " +
         quote(ck) + " --shardrun " + SHARDRUN_BINARY +
         " --mpirun 'mpirun --allow-run-as-root --oversubscribe --bind-to none' --backoff-s 0 --max-restarts 2" +
         " --health-timeout-s 20 -- --out-dir " + quote(out_dir) + " --checkpoint-every " + std::to_string(kEvery) +
         " --keep-last 2 --comm-timeout 60" + kLaunched + extra;
}

class Faults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("resilience_faults");
    plan_ = write_plan(*dir_, "z2", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 2}});
    const RunResult full = shardrun(2, plan_, dir_->file("reference"), kTraining);
    ASSERT_EQ(full.exit_code, 0) << full.output;
    ASSERT_EQ(full.losses.size(), static_cast<size_t>(kSteps));
    reference_ = new std::vector<double>(full.losses);
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete dir_;
  }
  // The losses of steps first..12 must be the uninterrupted run's, bit for bit (fp32, the data
  // order and dropout are functions of the step, the optimizer state is restored exactly).
  static void expect_reference_tail(const std::vector<double>& losses, int first_step) {
    ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps - first_step + 1)) << "steps " << first_step << "..12";
    for (size_t i = 0; i < losses.size(); ++i)
      EXPECT_EQ(losses[i], (*reference_)[first_step - 1 + i]) << "step " << first_step + i;
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::string plan_;
  static inline std::vector<double>* reference_ = nullptr;
};

class KillNine : public Faults, public ::testing::WithParamInterface<unsigned> {};

TEST_P(KillNine, ARandomRankKilledAtARandomStepResumesToTheSameLosses) {
  std::mt19937 rng(GetParam());
  const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
  const int step = std::uniform_int_distribution<int>(4, 9)(rng);  // after the first checkpoint
  const std::string name = "kill-seed" + std::to_string(GetParam());
  const std::string out = dir_->file(name), ck = dir_->file(name + "-ck"), metrics = out + "/metrics.jsonl";
  auto job = std::async(std::launch::async, [&] { return run_command(launcher(plan_, ck, out)); });
  // Watch metrics.jsonl; once `step` steps are logged, kill -9 the rank's process.
  size_t done_at_kill = 0;
  pid_t victim = -1;
  while (job.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) {
    if (lines_of(metrics) < static_cast<size_t>(step)) continue;
    // Its command line names this run's --out-dir; mpirun tells each rank its number.
    victim = find_process(SHARDRUN_BINARY, out, "OMPI_COMM_WORLD_RANK=" + std::to_string(rank));
    done_at_kill = lines_of(metrics);
    if (victim > 0 && ::kill(victim, SIGKILL) == 0) break;
  }
  const CommandResult r = job.get();
  ASSERT_GT(victim, 0) << "rank " << rank << " was never seen; " << r.out;
  ASSERT_EQ(r.status, 0) << r.out;

  const auto ev = jsonl(ck + "/launch-events.jsonl");
  std::vector<std::string> kinds;
  for (const auto& e : ev) kinds.push_back(e["event"]);
  ASSERT_EQ(kinds, (std::vector<std::string>{"launch", "exit", "health", "relaunch", "launch", "exit", "done"}))
      << r.out;
  EXPECT_EQ(ev[1]["verdict"], "retry");
  EXPECT_NE(ev[1]["code"].get<int>() + ev[1]["signal"].get<int>(), 0);
  EXPECT_TRUE(ev[2]["ok"].get<bool>());
  // No step lost beyond the last checkpoint: the relaunch starts at the newest checkpoint the
  // killed attempt had committed — at least the last multiple of 3 it had logged (one fewer
  // if the kill landed while that very checkpoint was being written).
  const int resumed = ev[4]["resume_step"].is_null() ? 0 : ev[4]["resume_step"].get<int>();  // null: from scratch
  const int logged = static_cast<int>(done_at_kill) / kEvery * kEvery;
  EXPECT_EQ(resumed % kEvery, 0);
  EXPECT_GE(resumed, done_at_kill % kEvery == 0 ? logged - kEvery : logged) << "killed after " << done_at_kill;
  EXPECT_EQ(ev[3]["resume_step"], ev[4]["resume_step"]);
  // Both attempts are in the history: the killed one's steps 1.. as logged, then the relaunch's.
  const std::vector<nlohmann::json> all = jsonl(metrics);
  const std::vector<nlohmann::json> first = attempt_lines(all, 1), steps = attempt_lines(all, 2);
  ASSERT_EQ(first.size() + steps.size(), all.size()) << "lines of no attempt";
  ASSERT_GE(first.size(), done_at_kill);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i]["step"].get<size_t>(), i + 1);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front()["step"].get<int>(), resumed + 1);
  EXPECT_EQ(steps.back()["step"].get<int>(), kSteps);
  std::vector<double> losses;
  for (const auto& s : steps) losses.push_back(s["loss"].get<double>());
  expect_reference_tail(losses, resumed + 1);
  std::printf(
      "[ seed %u ] killed rank %d after %zu logged steps; relaunch resumed at step %d; attempt 1 %.1f s, "
      "health %.1f s, attempt 2 %.1f s\n",
      GetParam(), rank, done_at_kill, resumed, ev[1]["seconds"].get<double>(), ev[2]["seconds"].get<double>(),
      ev[5]["seconds"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Seeds, KillNine, ::testing::Values(1u, 2u, 3u));

TEST_F(Faults, SigtermToTheLauncherStopsTheJobAtACheckpointWithoutARelaunch) {
  const std::string out = dir_->file("sigterm"), ck = dir_->file("sigterm-ck"), metrics = out + "/metrics.jsonl";
  auto job = std::async(std::launch::async, [&] { return run_command(launcher(plan_, ck, out)); });
  pid_t launcher_pid = -1;
  while (job.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) {
    if (lines_of(metrics) < 4) continue;
    launcher_pid = find_process(SHARDRUN_LAUNCH_BINARY, out);
    if (launcher_pid > 0 && ::kill(launcher_pid, SIGTERM) == 0) break;  // as scancel / Ctrl-C would
  }
  const CommandResult r = job.get();
  ASSERT_GT(launcher_pid, 0) << r.out;
  EXPECT_EQ(r.status, 130) << r.out;
  const auto ev = jsonl(ck + "/launch-events.jsonl");
  std::vector<std::string> kinds;
  for (const auto& e : ev) kinds.push_back(e["event"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"launch", "exit", "interrupted"})) << r.out;
  // shardrun agreed on a step boundary, checkpointed there and left: the newest checkpoint is the
  // last logged step, and it is not one of the every-3 ones only.
  const auto steps = executor::io::CheckpointStore(ck).complete_steps();
  ASSERT_FALSE(steps.empty()) << r.out;
  EXPECT_EQ(steps.back(), static_cast<int64_t>(lines_of(metrics))) << r.out;
  EXPECT_EQ(find_process(SHARDRUN_BINARY, out), -1) << "a rank outlived the launcher";
}

TEST_F(Faults, KillDuringACheckpointWriteKeepsThePreviousCheckpoint) {
  const std::string ck = dir_->file("torn-ck"), out = dir_->file("torn");
  const RunResult killed = shardrun(
      2, plan_, out,
      kTraining + " --checkpoint-dir " + quote(ck) + " --checkpoint-every 3 --keep-last 2 --inject-fault ckptkill:1:6");
  EXPECT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_NE(killed.output.find("injected fault 'ckptkill'"), std::string::npos) << killed.output;
  // Step 6 was never committed (a torn shard, no manifest); step 3 is complete and verifies.
  const executor::io::CheckpointStore store(ck);
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(fs::exists(store.partial_dir(6) + "/tp0-pp0-shard1.safetensors"));
  EXPECT_FALSE(fs::exists(store.partial_dir(6) + "/manifest.json"));
  std::vector<std::string> warnings;
  const auto latest = store.latest_valid({}, warnings);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 3);
  // The launcher resumes from step 3 and finishes with the reference losses.
  const CommandResult r = run_command(launcher(plan_, ck, out));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto ev = jsonl(ck + "/launch-events.jsonl");
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front()["resume_step"], 3);
  std::vector<double> losses;  // the launcher's attempt, after the killed run's steps 1..5
  for (const auto& s : attempt_lines(jsonl(out + "/metrics.jsonl"), 2)) losses.push_back(s["loss"].get<double>());
  expect_reference_tail(losses, 4);
  EXPECT_FALSE(fs::exists(store.partial_dir(6))) << "the stale partial checkpoint was not cleaned up";
}

TEST_F(Faults, ARunKilledAndResumedTwiceKeepsAllThreeAttemptsInItsHistory) {
  // kill -9 of one rank at the start of step 5, then (resumed from step 3) at the start of step 9,
  // then (resumed from step 6) to the end; all three write to the same metrics.jsonl.
  const std::string ck = dir_->file("twice-ck"), out = dir_->file("twice");
  const std::string args =
      kTraining + " --checkpoint-dir " + quote(ck) + " --checkpoint-every 3 --keep-last 2 --resume auto";
  const RunResult a1 = shardrun(2, plan_, out, args + " --inject-fault exit:1:5");
  ASSERT_NE(a1.exit_code, 0) << a1.output;
  const RunResult a2 = shardrun(2, plan_, out, args + " --inject-fault exit:0:9");
  ASSERT_NE(a2.exit_code, 0) << a2.output;
  const RunResult a3 = shardrun(2, plan_, out, args);
  ASSERT_EQ(a3.exit_code, 0) << a3.output;

  const std::vector<nlohmann::json> all = jsonl(out + "/metrics.jsonl");
  std::vector<std::vector<nlohmann::json>> by(4);
  for (int a = 1; a <= 3; ++a) by[a] = attempt_lines(all, a);
  ASSERT_EQ(by[1].size() + by[2].size() + by[3].size(), all.size()) << "lines of no attempt";
  for (int a = 1; a <= 3; ++a) ASSERT_FALSE(by[a].empty()) << "attempt " << a;
  // Each attempt's steps are consecutive and start after a checkpoint the one before it reached;
  // every step any attempt logged has the uninterrupted run's loss, bit for bit.
  for (int a = 1; a <= 3; ++a) {
    const int first = by[a].front()["step"].get<int>();
    EXPECT_EQ((first - 1) % kEvery, 0) << "attempt " << a;
    if (a > 1) { EXPECT_LE(first - 1, by[a - 1].back()["step"].get<int>()) << "attempt " << a << " skipped steps"; }
    for (size_t i = 0; i < by[a].size(); ++i) {
      const int step = by[a][i]["step"].get<int>();
      EXPECT_EQ(step, first + static_cast<int>(i));
      EXPECT_EQ(by[a][i]["loss"].get<double>(), (*reference_)[static_cast<size_t>(step - 1)]) << "step " << step;
      EXPECT_GT(by[a][i]["unix_time_s"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(by[1].front()["step"], 1);
  EXPECT_LT(by[1].back()["step"].get<int>(), by[2].back()["step"].get<int>());
  EXPECT_EQ(by[3].back()["step"], kSteps);

  // report.json summarises the three: steps run, and per restart the steps run again and the gap.
  const nlohmann::json& h = a3.report.at("attempts");
  ASSERT_EQ(h["count"], 3) << h.dump(2);
  ASSERT_EQ(h["per_attempt"].size(), 3u);
  EXPECT_EQ(h["steps_run"], all.size());
  int64_t lost = 0;
  for (int a = 2; a <= 3; ++a) {
    const nlohmann::json& p = h["per_attempt"][static_cast<size_t>(a - 1)];
    EXPECT_EQ(p["first_step"], by[a].front()["step"]);
    const int64_t again = by[a - 1].back()["step"].get<int64_t>() - by[a].front()["step"].get<int64_t>() + 1;
    EXPECT_EQ(p["steps_lost"], again) << p.dump();
    EXPECT_GE(p["restart_gap_seconds"].get<double>(), 0.0) << p.dump();
    lost += again;
  }
  EXPECT_EQ(h["steps_lost"], lost);
  EXPECT_EQ(a3.report["measured"]["steps"], by[3].size()) << "the measured medians are this attempt's";
  std::printf("[ history ] attempts of %zu, %zu, %zu steps; %lld steps run again; restart gaps %.2f s in all\n",
              by[1].size(), by[2].size(), by[3].size(), static_cast<long long>(lost),
              h["restart_gap_seconds"].get<double>());
}

TEST_F(Faults, ARankThatStopsMakingProgressIsCaughtByTheWatchdogAndTheJobResumes) {
  // Rank 1 stops at the start of step 5 outside any collective (its peer waits in the next one,
  // whose timeout, 60 s, is far off); the watchdog's 4 s limit ends it with exit 75, the launcher
  // health-checks and relaunches from the step-3 checkpoint, and the run ends with the reference.
  const std::string out = dir_->file("stall"), ck = dir_->file("stall-ck");
  const auto t0 = Clock::now();
  const CommandResult r =
      run_command(launcher(plan_, ck, out, " --stall-factor 0 --stall-min-s 4 --inject-fault stall:1:5"));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rank 1: stalled: no training step completed for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stuck in 'between steps'"), std::string::npos) << r.out;
  const auto ev = jsonl(ck + "/launch-events.jsonl");
  std::vector<std::string> kinds;
  for (const auto& e : ev) kinds.push_back(e["event"]);
  ASSERT_EQ(kinds, (std::vector<std::string>{"launch", "exit", "health", "relaunch", "launch", "exit", "done"}))
      << r.out;
  EXPECT_EQ(ev[1]["code"], 75) << ev[1].dump();
  EXPECT_TRUE(ev[1]["stalled"].get<bool>()) << ev[1].dump();
  EXPECT_EQ(ev[1]["verdict"], "retry");
  EXPECT_EQ(ev[4]["resume_step"], 3);
  // Caught by the watchdog, not by the 60 s communication timeout.
  EXPECT_LT(ev[1]["seconds"].get<double>(), 60.0) << ev[1].dump();
  std::vector<double> losses;
  for (const auto& s : attempt_lines(jsonl(out + "/metrics.jsonl"), 2)) losses.push_back(s["loss"].get<double>());
  expect_reference_tail(losses, 4);
  std::printf("[ stall ] attempt 1 ended after %.1f s (watchdog 4 s), health %.1f s; whole job %.1f s\n",
              ev[1]["seconds"].get<double>(), ev[2]["seconds"].get<double>(), seconds);
}

TEST_F(Faults, ACorruptedCheckpointIsSkippedWithAMessageNamingTheFile) {
  const std::string ck = dir_->file("corrupt-ck");
  const std::string args = kTraining + " --checkpoint-dir " + quote(ck) + " --checkpoint-every 3 --keep-last 3";
  ASSERT_EQ(shardrun(2, plan_, dir_->file("corrupt-1"), args + " --stop-after 9").exit_code, 0);
  const std::string shard = ck + "/step-00000009/tp0-pp0-shard1.safetensors";
  {  // flip bytes in the middle of the tensor data; the size stays the same
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(fs::file_size(shard));
    f.seekg(size / 2);
    char bytes[16];
    f.read(bytes, sizeof bytes);
    for (char& b : bytes) b = static_cast<char>(~b);
    f.seekp(size / 2);
    f.write(bytes, sizeof bytes);
  }
  const RunResult resumed = shardrun(2, plan_, dir_->file("corrupt-2"), args + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step-00000009: shard tp0-pp0-shard1.safetensors: checksum mismatch"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("skipping"), std::string::npos) << resumed.output;
  expect_reference_tail(resumed.losses, 7);  // from the step-6 checkpoint
}

TEST_F(Faults, ShardrunCheckpointsAtThePlansIntervalByDefault) {
  // A profile whose node fails every 0.72 s: absurd, but it brings the optimal interval of a
  // tiny model's tens-of-milliseconds steps down to a few steps.
  nlohmann::json plan = nlohmann::json::parse(std::ifstream(plan_));
  plan["cluster"]["hardware"]["resilience"] = {
      {"node_mtbf_hours", 0.0002}, {"checkpoint_write_GBps", 1}, {"restart_s", 0}};
  const std::string flaky = dir_->write_json("flaky.json", plan);
  const CommandResult sim = run_command(std::string(SHARDPLAN_BINARY) + " simulate --plan " + quote(flaky) + " --json");
  ASSERT_EQ(sim.status, 0) << sim.out;
  const int every = nlohmann::json::parse(sim.out)["resilience"]["checkpoint_interval_steps"];
  ASSERT_GE(every, 1);
  ASSERT_LT(every, kSteps) << "the interval should be a few steps for this test";
  const std::string ck = dir_->file("plan-ck");
  const RunResult r =
      shardrun(2, flaky, dir_->file("plan-interval"), kTraining + " --checkpoint-dir " + quote(ck) + " --keep-last 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<int64_t> expected;
  for (int s = every; s <= kSteps; s += every) expected.push_back(s);
  if (expected.empty() || expected.back() != kSteps) expected.push_back(kSteps);  // and at the end
  EXPECT_EQ(executor::io::CheckpointStore(ck).complete_steps(), expected) << "interval " << every;
}

}  // namespace run_faults_test
}  // namespace shardplan::testing
