// `shardplan plan / explain / export / simulate --plan / simulate --import` end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace plan_cli_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(SHARDPLAN_BINARY) + " " + args + " 2>/dev/null";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("shardplan_plan_cli_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TEST(PlanCli, PlanExplainSimulateAndExportAgree) {
  const fs::path dir = temp_dir();
  const std::string plan = (dir / "plan.json").string();
  const Result p =
      run("plan --model llama2-7b --hardware p4de.24xlarge --nodes 1,2 --global-batch-size 64 "
          "--seq-len 2048 --quiet --json --out " +
          plan);
  ASSERT_EQ(p.code, 0);
  const auto j = nlohmann::json::parse(p.out);
  ASSERT_FALSE(j["ranked"].empty());
  const double best_step = j["ranked"][0]["time"]["step_seconds"];
  // The plan file re-simulates to the same step time.
  const Result s = run("simulate --plan " + plan + " --json");
  ASSERT_EQ(s.code, 0);
  EXPECT_NEAR(nlohmann::json::parse(s.out)["time"]["step_seconds"].get<double>(), best_step, 1e-9 * best_step);
  const auto pj = nlohmann::json::parse(std::ifstream(plan));
  EXPECT_EQ(pj["schema"], "shardplan.plan/1");
  EXPECT_TRUE(pj.contains("rank_layout"));
  EXPECT_EQ(run("explain " + plan).code, 0);
  const Result e = run("export " + plan + " --out-dir " + (dir / "launch").string());
  ASSERT_EQ(e.code, 0);
  for (const char* f :
       {"launch_mpirun.sh", "launch_slurm.sbatch", "ds_config.json", "megatron_args.sh", "smp_parameters.json"})
    EXPECT_TRUE(fs::exists(dir / "launch" / f)) << f;
  EXPECT_EQ(std::system(("bash -n " + (dir / "launch" / "launch_slurm.sbatch").string()).c_str()), 0);
  fs::remove_all(dir);
}

TEST(PlanCli, NothingFitsExitsOneWithReasons) {
  const Result r = run("plan --model llama2-70b --hardware gaudi2-hls2 --global-batch-size 8 --seq-len 2048 --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("no configuration fits"), std::string::npos);
  EXPECT_NE(r.out.find("why not"), std::string::npos);
}

TEST(PlanCli, ImportEvaluatesADeepSpeedConfig) {
  const Result r = run("simulate --model llama2-70b --hardware gaudi2-hls2 --seq-len 2048 --json --import " +
                       std::string(SHARDPLAN_TEST_DATA_DIR) + "/import/ds_zero2_bf16.json");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["config"]["zero_stage"], 2);
}

TEST(PlanCli, LoraRankListComparesEachRank) {
  const Result r =
      run("plan --model llama2-7b --hardware p4de.24xlarge --global-batch-size 16 --seq-len 1024 "
          "--lora-rank 4,64 --lora-targets q_proj,v_proj --quiet --top 1");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("LoRA r=4:"), std::string::npos);
  EXPECT_NE(r.out.find("LoRA r=64:"), std::string::npos);
  EXPECT_NE(r.out.find("best: LoRA r="), std::string::npos);
}

TEST(PlanCli, BadPlanFileIsOneLineExitTwo) {
  const fs::path dir = temp_dir();
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << R"({"schema": "shardplan.plan/1"})";
  const std::string cmd = std::string(SHARDPLAN_BINARY) + " explain " + bad + " 2>&1 >/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[1024] = {0};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  const int status = ::pclose(p);
  const std::string err(buf, n);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(err.find("bad.json"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  fs::remove_all(dir);
}

}  // namespace plan_cli_test
