// A real single-node Slurm (scripts/slurm-local.sh: munged + slurmctld + slurmd on localhost):
// the sbatch script `shardplan export` writes for a tiny plan is submitted with `sbatch --wait`,
// runs shardrun through `srun --mpi=pmix`, and its report is read back. Skipped, with the
// reason, where Slurm cannot start (not root, packages missing, daemons refused).
#include <gtest/gtest.h>

#include <cmath>

#include "executor/harness.hpp"

namespace shardplan::testing {
namespace {

const std::string kScript = std::string(SHARDPLAN_SOURCE_DIR) + "/scripts/slurm-local.sh";

class LocalSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = dir_.file("slurm");
    const CommandResult up = run_command("SHARDPLAN_SLURM_PORT=16917 bash " + quote(kScript) + " start " + quote(state_));
    if (up.status != 0) GTEST_SKIP() << "Slurm could not start on this machine: " << up.out;
    started_ = true;
  }
  void TearDown() override {
    if (started_) run_command("bash " + quote(kScript) + " stop " + quote(state_));
  }
  [[nodiscard]] std::string env() const { return "SLURM_CONF=" + quote(state_ + "/slurm.conf") + " "; }
  TempDir dir_{"resilience_slurm"};
  std::string state_;
  bool started_ = false;
};

TEST_F(LocalSlurm, ExportedSbatchRunsATinyPlanAndWritesItsReport) {
  const std::string plan = write_plan(dir_, "dp2", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 1}});
  const std::string out = dir_.file("out"), launch = dir_.file("launch");
  const CommandResult exported = run_command(
      std::string(SHARDPLAN_BINARY) + " export " + quote(plan) + " --out-dir " + quote(launch) + " --steps 4" +
      " --shardrun " + quote(SHARDRUN_BINARY) + " --checkpoint-dir " + quote(dir_.file("ck")) + " --retry-delay 0" +
      " --shardrun-arg=--out-dir=" + quote(out) + " --shardrun-arg=--threads=1 --shardrun-arg=--quiet");
  ASSERT_EQ(exported.status, 0) << exported.out;
  const CommandResult job =
      run_command("timeout 600 env " + env() + "sbatch --wait --chdir " + quote(dir_.path().string()) + " --output " +
                  quote(dir_.file("slurm-%j.out")) + " " + quote(launch + "/launch_slurm.sbatch"));
  std::string log;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    if (e.path().filename().string().rfind("slurm-", 0) == 0 && e.path().extension() == ".out")
      log = std::string(std::istreambuf_iterator<char>(std::ifstream(e.path()).rdbuf()), {});
  ASSERT_EQ(job.status, 0) << job.out << "\n--- job output ---\n" << log;
  EXPECT_NE(log.find("[shardplan] finished after 1 attempt(s)"), std::string::npos) << log;
  const auto report = nlohmann::json::parse(std::ifstream(out + "/report.json"));
  EXPECT_EQ(report["world_size"], 2);
  EXPECT_EQ(report["measured"]["steps"], 4);
  EXPECT_TRUE(std::isfinite(report["measured"]["final_loss"].get<double>()));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("ck/step-00000004/manifest.json")));
}

}  // namespace
}  // namespace shardplan::testing
