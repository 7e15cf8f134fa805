// `shardplan calibrate` end to end: a validation file with synthetic measurements (step times
// simulated on a profile perturbed by known factors) in, a calibrated profile that loads back
// and reproduces the reported predictions out; bad input exits 2 with one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "simulator/prediction_json.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace calibrate_cli_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;

struct Case {
  const char* name;
  const char* model;
  int tp, dp, zero, mbs, gbs, seq;
};

const std::vector<Case> kCases{
    {"a-llama-1rank", "tiny-llama", 1, 1, 0, 1, 4, 128},    {"b-llama-1rank-mbs4", "tiny-llama", 1, 1, 0, 4, 8, 256},
    {"c-llama-dp2-z0", "tiny-llama", 1, 2, 0, 2, 8, 128},   {"d-llama-dp2-z1", "tiny-llama", 1, 2, 1, 1, 4, 256},
    {"e-llama-tp2", "tiny-llama", 2, 1, 0, 2, 4, 128},      {"f-gpt-1rank-s64", "tiny-gpt", 1, 1, 0, 8, 16, 64},
    {"g-gpt-dp2-z2", "tiny-gpt", 1, 2, 2, 2, 8, 256},       {"h-gpt-tp2-s512", "tiny-gpt", 2, 1, 0, 1, 2, 512},
    {"i-llama-1rank-s16", "tiny-llama", 1, 1, 0, 1, 1, 16}, {"j-gpt-dp2-s32", "tiny-gpt", 1, 2, 0, 1, 2, 32},
};

struct PlannedRun {
  std::string name;
  sim::ModelSpec model;
  sim::ParallelConfig cfg;
  int per_node = 1;
};

// The plan file's schema (formats/plan.hpp); this test binary links the simulator only.
nlohmann::json plan_json(const PlannedRun& r, const sim::HardwareProfile& hw) {
  return {{"schema", "shardplan.plan/1"},
          {"model", sim::to_card_json(r.model)},
          {"cluster", {{"nodes", 1}, {"devices_per_node", r.per_node}, {"hardware", sim::to_json(hw)}}},
          {"config", sim::to_json(r.cfg)}};
}

double step_s(const PlannedRun& r, const sim::HardwareProfile& hw) {
  sim::ParallelConfig cfg = r.cfg;
  return sim::simulate(r.model, sim::ClusterSpec{hw, 1, r.per_node}, cfg).time.step_s;
}

sim::HardwareProfile real_machine(sim::HardwareProfile hw) {
  for (double& p : hw.device.peak_flops) p *= 0.7;
  hw.device.memory_bandwidth_Bps *= 1.3;
  hw.node.intra.bandwidth_Bps *= 0.5;
  hw.network.bandwidth_Bps *= 0.5;
  hw.device.kernel_launch_s = 7e-6;
  return hw;
}

class CalibrateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = sim::load_hardware("local-cpu-2core");
    std::filesystem::copy_file(base_.source_file, dir_.file("profile.json"));
    std::filesystem::create_directories(dir_.path() / "plans");
    for (const Case& k : kCases) {
      PlannedRun r{k.name, sim::load_model(k.model), {}, k.tp * k.dp};
      r.cfg.tp = k.tp;
      r.cfg.dp = k.dp;
      r.cfg.zero_stage = k.zero;
      r.cfg.micro_batch_size = k.mbs;
      r.cfg.global_batch_size = k.gbs;
      r.cfg.seq_len = k.seq;
      step_s(r, base_);  // validates and fills defaults
      dir_.write_json("plans/" + r.name + ".json", plan_json(r, base_));
      runs_.push_back(r);
    }
  }

  // A `shardplan validate --json` file over runs [first, last).
  std::string validation(const std::string& file, std::size_t first, std::size_t last) {
    nlohmann::json j{{"schema", "shardplan.validation/1"},
                     {"hardware", base_.name},
                     {"hardware_file", "profile.json"},
                     {"steps", 8},
                     {"threads_per_rank", 1},
                     {"cores", 2},
                     {"runs", nlohmann::json::array()}};
    const sim::HardwareProfile real = real_machine(base_);
    for (std::size_t i = first; i < last; ++i)
      j["runs"].push_back({{"name", runs_[i].name},
                           {"status", "ran"},
                           {"reason", ""},
                           {"ranks", runs_[i].per_node},
                           {"time_judged", true},
                           {"plan_file", "plans/" + runs_[i].name + ".json"},
                           {"measured", {{"step_seconds", step_s(runs_[i], real)}}}});
    return dir_.write_json(file, j);
  }

  static shardplan::testing::CommandResult shardplan(const std::string& args) {
    return run_command(std::string(SHARDPLAN_BINARY) + " calibrate " + args);
  }

  // Exit 2 and exactly one line on the output.
  static std::string one_line_error(const std::string& args) {
    const auto r = shardplan(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    return r.out;
  }

  TempDir dir_{"shardplan_calibrate_cli"};
  sim::HardwareProfile base_;
  std::vector<PlannedRun> runs_;
};

TEST_F(CalibrateCli, WritesAProfileThatReproducesTheReportedPredictions) {
  const std::string v = validation("validation.json", 0, runs_.size());
  const std::string out = dir_.file("calibrated.json"), report = dir_.file("report.json");
  const auto r = shardplan("--runs " + v + " --out " + out + " --json " + report);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("hold-out, after"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("c-llama-dp2-z0"), std::string::npos) << r.out;

  const auto rep = sim::read_json_file(report);
  EXPECT_EQ(rep.at("schema"), "shardplan.calibration/1");
  EXPECT_EQ(rep.at("base_profile_file"), dir_.file("profile.json"));  // hardware_file, relative to the runs file
  EXPECT_EQ(rep.at("holdout_runs"), (nlohmann::json{"c-llama-dp2-z0", "f-gpt-1rank-s64", "i-llama-1rank-s16"}));
  const auto& p = rep.at("parameters");
  EXPECT_NEAR(p.at("compute_scale").at("value").get<double>(), 0.7, 0.014);
  EXPECT_NEAR(p.at("memory_scale").at("value").get<double>(), 1.3, 0.026);
  EXPECT_NEAR(p.at("comm_scale").at("value").get<double>(), 0.5, 0.01);
  EXPECT_NEAR(p.at("kernel_launch_us").at("value").get<double>(), 7.0, 0.14);
  EXPECT_GT(rep.at("step_seconds_error_before").at("holdout").at("mean").get<double>(), 0.1);
  EXPECT_LT(rep.at("step_seconds_error_after").at("holdout").at("worst").get<double>(), 1e-3);

  // The written profile loads with the ordinary loader and gives the "after" predictions.
  const sim::HardwareProfile cal = sim::load_hardware(out);
  EXPECT_EQ(cal.name, "local-cpu-2core-calibrated");
  EXPECT_TRUE(cal.measured);
  ASSERT_EQ(rep.at("runs").size(), runs_.size());
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    const auto& row = rep.at("runs")[i];
    ASSERT_EQ(row.at("name"), runs_[i].name);
    const double after = row.at("predicted_step_seconds_after");
    EXPECT_NEAR(step_s(runs_[i], cal), after, 1e-12 * after) << runs_[i].name;
    EXPECT_NEAR(step_s(runs_[i], base_), row.at("predicted_step_seconds_before").get<double>(), 1e-12 * after);
  }
  const auto written = sim::read_json_file(out);
  EXPECT_EQ(written.at("calibration").at("runs_file"), (nlohmann::json{v}));
  EXPECT_NE(written.at("sources").at("device.memory_bandwidth_bytes_per_s").get<std::string>().find("memory_scale"),
            std::string::npos);
}

TEST_F(CalibrateCli, MergesRunsFilesAndTakesNamedHoldOuts) {
  const std::string a = validation("a.json", 0, 4), b = validation("b.json", 4, runs_.size());
  const std::string report = dir_.file("report.json");
  const auto r = shardplan("--runs " + a + " --runs " + b +
                           " --hardware local-cpu-2core --holdout e-llama-tp2,a-llama-1rank"
                           " --out " +
                           dir_.file("cal.json") + " --json " + report);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rep = sim::read_json_file(report);
  EXPECT_EQ(rep.at("runs").size(), runs_.size());
  EXPECT_EQ(rep.at("holdout_runs"), (nlohmann::json{"a-llama-1rank", "e-llama-tp2"}));
  EXPECT_EQ(rep.at("runs_file"), (nlohmann::json{a, b}));
  EXPECT_LT(rep.at("step_seconds_error_after").at("holdout").at("worst").get<double>(), 1e-3);
}

TEST_F(CalibrateCli, BadInputExitsTwoWithOneLine) {
  const std::string v = validation("validation.json", 0, runs_.size());
  const std::string out = " --out " + dir_.file("cal.json");
  EXPECT_NE(one_line_error("--runs " + dir_.file("absent.json") + out)
                .find("--runs: file '" + dir_.file("absent.json") + "' does not exist"),
            std::string::npos);

  nlohmann::json j = sim::read_json_file(v);
  j["schema"] = "shardplan.validation/0";
  const std::string wrong = dir_.write_json("wrong.json", j);
  EXPECT_NE(
      one_line_error("--runs " + wrong + out).find(wrong + ": field 'schema': expected \"shardplan.validation/1\""),
      std::string::npos);

  j = sim::read_json_file(v);
  j["runs"][2]["plan_file"] = "plans/gone.json";
  const std::string missing = dir_.write_json("missing.json", j);
  EXPECT_NE(one_line_error("--runs " + missing + out)
                .find(missing + ": field 'runs[2].plan_file': expected an existing "
                                "plan file"),
            std::string::npos);

  EXPECT_NE(one_line_error("--runs " + v + out + " --holdout nobody").find("--holdout: no usable run named 'nobody'"),
            std::string::npos);
  EXPECT_NE(one_line_error("--runs " + v + out + " --fit compute_scale,warp").find("--fit: unknown parameter 'warp'"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("cal.json")));  // nothing written on error
}

}  // namespace calibrate_cli_test
