// `shardrun profile`: a quick profile under mpirun writes a measured hardware profile that the
// simulator and the planner load; its fitted figures agree with its own raw samples; bad
// options fail on every rank with one line and write nothing. The fit from samples to profile
// figures is also checked on synthetic samples from a known device.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "executor/profile/profile_samples.hpp"
#include "harness.hpp"
#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"

namespace shardplan::testing {
namespace {

namespace fs = std::filesystem;
namespace sim = shardplan::simulator;

CommandResult profile(int ranks, const std::string& args) {
  return run_command("timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(ranks) +
                     " " + SHARDRUN_BINARY + " profile --threads 1 " + args);
}

TEST(Profile, QuickTwoRankProfileLoadsEverywhere) {
  TempDir dir;
  const std::string out = dir.file("measured.json");
  const CommandResult r = profile(2, "--quick --name test-measured --out " + quote(out));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("[profile] gemm"), std::string::npos) << r.out;  // progress lines
  EXPECT_NE(r.out.find("[profile] all_reduce"), std::string::npos) << r.out;

  const sim::HardwareProfile hw = sim::load_hardware(out);
  EXPECT_TRUE(hw.measured);
  EXPECT_EQ(hw.name, "test-measured");
  EXPECT_EQ(hw.node.devices_per_node, 2);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
  // The fitted figures are the raw samples' best rates.
  double best_fp32 = 0, launch = 0;
  for (const auto& s : j["samples"]["kernels"])
    if (s["kind"] == "launch") launch = s["seconds"].get<double>();
  for (const auto& s : j["samples"]["kernels"])
    if (s["dtype"] == "fp32" && s["flops"].get<double>() > 0)
      best_fp32 = std::max(best_fp32, s["flops"].get<double>() / (s["seconds"].get<double>() - launch));
  EXPECT_NEAR(hw.device.peak(sim::Precision::fp32), best_fp32, 1e-6 * best_fp32);
  EXPECT_GT(hw.device.peak(sim::Precision::bf16), 0.0);
  EXPECT_FALSE(hw.device.gemm_curve(sim::Precision::bf16).log10_x.empty());
  EXPECT_DOUBLE_EQ(hw.device.kernel_launch_s, launch);
  EXPECT_GT(hw.device.memory_bandwidth_Bps, 0.0);
  EXPECT_GE(j["samples"]["collectives"].size(), 8u);
  EXPECT_GT(hw.node.intra.bandwidth_Bps, 0.0);
  EXPECT_NE(j["sources"]["node.intra_node.bandwidth_bytes_per_s"].get<std::string>().find("shardrun profile"),
            std::string::npos);

  // The planner plans with it.
  const CommandResult plan = run_command(std::string(SHARDPLAN_BINARY) +
                                         " simulate --model tiny-llama --hardware " + quote(out) +
                                         " --nodes 1 --dp 2 --zero 1 --seq-len 128 --micro-batch-size 4 --precision fp32");
  EXPECT_EQ(plan.status, 0) << plan.out;
}

TEST(Profile, BadOptionsFailOnEveryRankAndWriteNothing) {
  TempDir dir;
  const std::string out = dir.file("never.json");
  for (const char* bad : {"--dtypes fp16", "--dtypes int8", "--base no-such-profile", "--device tpu"}) {
    const CommandResult r = profile(2, "--quick --out " + quote(out) + " " + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_EQ(count_of(r.out, "shardrun: error:"), 1u) << bad << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << bad;
  }
}

// Synthetic samples from a device with known figures come back as those figures.
TEST(ProfileWriter, FitsAKnownDevice) {
  executor::ProfileRun run;
  run.base = sim::load_hardware("local-cpu-2core");
  run.base_name = "local-cpu-2core";
  run.name = "synthetic";
  run.device_name = "synthetic device";
  run.world_size = run.ranks_on_node = 2;
  run.host_memory_bytes = 8e9;
  run.date = "2026-11-21";
  const double peak = 2e11, bw = 4e10, launch = 3e-6;
  run.kernels.push_back({"launch", "fp32", "1", 0, 12, launch});
  for (double f = 1e5; f <= 1e11; f *= 10) {
    const double eff = f >= 1e9 ? 1.0 : 0.5 + 0.5 * (std::log10(f) - 5) / 4;  // rises to 1 at 1e9
    run.kernels.push_back({"gemm", "fp32", "g", f, 0, launch + f / (peak * eff)});
  }
  for (double b = 1e4; b <= 1e9; b *= 10) run.kernels.push_back({"elementwise", "fp32", "e", 0, b, launch + b / bw});
  for (double S = 64; S <= 1e7; S *= 4) run.links.push_back({"all_reduce", S, 2, S, 2 * 5e-6 + S / 2e9});
  const nlohmann::json j = executor::measured_profile_json(run);
  const sim::HardwareProfile hw = sim::hardware_from_json(j, "synthetic");
  EXPECT_NEAR(hw.device.peak(sim::Precision::fp32), peak, 1e-6 * peak);
  EXPECT_NEAR(hw.device.memory_bandwidth_Bps, bw, 1e-6 * bw);
  EXPECT_NEAR(hw.device.memory_efficiency.at(1e6), 1.0, 1e-6);
  EXPECT_NEAR(hw.device.gemm_efficiency.at(1e11), 1.0, 0.02);
  EXPECT_LT(hw.device.gemm_efficiency.at(1e5), 0.6);
  EXPECT_NEAR(hw.node.intra.latency_s, 5e-6, 1e-9);
  EXPECT_NEAR(hw.node.intra.bandwidth_Bps, 2e9, 1e3);
  EXPECT_NEAR(hw.device.memory_bytes, 0.85 * 8e9 / 2, 1.0);
  EXPECT_EQ(hw.device.peak(sim::Precision::fp16), run.base.device.peak(sim::Precision::fp16));  // not measured
  EXPECT_NE(j["sources"]["device.peak_TFLOPs.fp16"].get<std::string>().find("not measured"), std::string::npos);

  executor::ProfileRun empty = run;
  empty.kernels.erase(empty.kernels.begin() + 1, empty.kernels.begin() + 8);  // no GEMMs
  EXPECT_THROW(executor::measured_profile_json(empty), sim::InputError);
}

}  // namespace
}  // namespace shardplan::testing
