// A real single-node Slurm (scripts/slurm-local.sh: munged + slurmctld + slurmd on localhost):
// the sbatch script `shardplan export` writes for a tiny plan is submitted with `sbatch --wait`,
// runs shardrun through `srun --mpi=pmix`, and its report is read back; and the same job with
// one task killed (kill -9) mid-run is health-checked and resumed by the script's retry loop. Skipped, with the
// reason, where Slurm cannot start (not root, packages missing, daemons refused).
#include <gtest/gtest.h>

#include <cmath>

#include <signal.h>

#include <chrono>
#include <future>

#include "executor/harness.hpp"
#include "processes.hpp"

namespace shardplan::testing {
namespace run_slurm_test {  // named, not anonymous: the files share a unity-build unit

const std::string kScript = std::string(SHARDPLAN_SOURCE_DIR) + "/scripts/slurm-local.sh";

class LocalSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = dir_.file("slurm");
    const CommandResult up =
        run_command("SHARDPLAN_SLURM_PORT=16917 bash " + quote(kScript) + " start " + quote(state_));
    if (up.status != 0) GTEST_SKIP() << "Slurm could not start on this machine: " << up.out;
    started_ = true;
  }
  void TearDown() override {
    if (started_) run_command("bash " + quote(kScript) + " stop " + quote(state_));
  }
  [[nodiscard]] std::string env() const { return "SLURM_CONF=" + quote(state_ + "/slurm.conf") + " "; }
  // Writes the plan and `shardplan export`s its sbatch script; returns the script's path.
  std::string export_job(const std::string& out, int steps, const std::string& extra = "") {
    const std::string plan = write_plan(dir_, "dp2", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 1}});
    const std::string launch = dir_.file("launch");
    const CommandResult exported = run_command(
        std::string(SHARDPLAN_BINARY) + " export " + quote(plan) + " --out-dir " + quote(launch) + " --steps " +
        std::to_string(steps) + " --shardrun " + quote(SHARDRUN_BINARY) + " --checkpoint-dir " +
        quote(dir_.file("ck")) + " --retry-delay 0 --shardrun-arg=--out-dir=" + quote(out) +
        " --shardrun-arg=--threads=1 --shardrun-arg=--quiet" + extra);
    EXPECT_EQ(exported.status, 0) << exported.out;
    return launch + "/launch_slurm.sbatch";
  }
  CommandResult sbatch_wait(const std::string& script) const {
    return run_command("timeout 600 env " + env() + "sbatch --wait --chdir " + quote(dir_.path().string()) +
                       " --output " + quote(dir_.file("slurm-%j.out")) + " " + quote(script));
  }
  [[nodiscard]] std::string job_log() const {
    std::string log;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
      if (e.path().filename().string().rfind("slurm-", 0) == 0 && e.path().extension() == ".out")
        log = std::string(std::istreambuf_iterator<char>(std::ifstream(e.path()).rdbuf()), {});
    return log;
  }
  TempDir dir_{"resilience_slurm"};
  std::string state_;
  bool started_ = false;
};

TEST_F(LocalSlurm, ExportedSbatchRunsATinyPlanAndWritesItsReport) {
  const std::string out = dir_.file("out");
  const CommandResult job = sbatch_wait(export_job(out, 4));
  const std::string log = job_log();
  ASSERT_EQ(job.status, 0) << job.out << "\n--- job output ---\n" << log;
  EXPECT_NE(log.find("[shardplan] finished after 1 attempt(s)"), std::string::npos) << log;
  const auto report = nlohmann::json::parse(std::ifstream(out + "/report.json"));
  EXPECT_EQ(report["world_size"], 2);
  EXPECT_EQ(report["measured"]["steps"], 4);
  EXPECT_TRUE(std::isfinite(report["measured"]["final_loss"].get<double>()));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("ck/step-00000004/manifest.json")));
}

TEST_F(LocalSlurm, ARankKilledInsideTheJobIsHealthCheckedAndResumed) {
  // kill -9 of task 1 of the srun step at step 3: srun --kill-on-bad-exit ends the step, the
  // script health-checks with `srun shardrun health` and relaunches from the step-2 checkpoint.
  const std::string out = dir_.file("out"), metrics = out + "/metrics.jsonl";
  const std::string script = export_job(out, 8, " --shardrun-arg=--checkpoint-every=2");
  auto job = std::async(std::launch::async, [&] { return sbatch_wait(script); });
  pid_t victim = -1;
  while (job.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) {
    std::ifstream in(metrics);
    size_t lines = 0;
    for (std::string l; std::getline(in, l);) lines += !l.empty();
    if (lines < 3) continue;
    victim = find_process(SHARDRUN_BINARY, out, "SLURM_PROCID=1");
    if (victim > 0 && ::kill(victim, SIGKILL) == 0) break;
  }
  const CommandResult r = job.get();
  const std::string log = job_log();
  ASSERT_GT(victim, 0) << "task 1 was never seen\n" << log;
  ASSERT_EQ(r.status, 0) << r.out << "\n--- job output ---\n" << log;
  EXPECT_NE(log.find("[shardplan] attempt 1 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("[shardplan] health check before attempt 2"), std::string::npos) << log;
  EXPECT_NE(log.find("health: ok (2 of 2 rank(s) healthy"), std::string::npos) << log;
  EXPECT_NE(log.find("[shardplan] finished after 2 attempt(s)"), std::string::npos) << log;
  // The second attempt resumed from a checkpoint and ended at 8; metrics.jsonl keeps both
  // attempts' steps, the first's from step 1.
  std::vector<int> steps, first;
  std::ifstream in(metrics);
  for (std::string l; std::getline(in, l);) {
    if (l.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(l);
    (j["attempt"].get<int>() == 2 ? steps : first).push_back(j["step"].get<int>());
  }
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.front(), 1);
  ASSERT_FALSE(steps.empty());
  EXPECT_GT(steps.front(), 1) << "the relaunch started from scratch";
  EXPECT_EQ(steps.front() % 2, 1);
  EXPECT_EQ(steps.back(), 8);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(out + "/report.json"))["measured"]["steps"],
            static_cast<int>(steps.size()));
}

}  // namespace run_slurm_test
}  // namespace shardplan::testing
