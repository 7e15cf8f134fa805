// Calibration against synthetic measurements: step times simulated with a profile perturbed by
// known factors must give those factors back (exactly, and within the noise when noisy); the
// hold-out split, identifiability, loading validation files and the written profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "calibration/calibration.hpp"
#include "formats/plan.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::calibration {
namespace calibration_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using shardplan::testing::TempDir;

struct Case {
  const char* name;
  const char* model;
  int tp, dp, zero, mbs, gbs, seq;
  sim::Precision precision = sim::Precision::bf16;
  int lora_rank = 0;
  bool sequence_parallel = false;
};

// Varied enough that compute, memory traffic, communication and kernel count do not move together.
const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {"a-llama-1rank-mbs1-s128", "tiny-llama", 1, 1, 0, 1, 4, 128},
      {"b-llama-1rank-mbs4-s256-fp32", "tiny-llama", 1, 1, 0, 4, 8, 256, sim::Precision::fp32},
      {"c-llama-dp2-z0-mbs2", "tiny-llama", 1, 2, 0, 2, 8, 128},
      {"d-llama-dp2-z1-s256", "tiny-llama", 1, 2, 1, 1, 4, 256},
      {"e-llama-tp2-mbs2", "tiny-llama", 2, 1, 0, 2, 4, 128},
      {"f-gpt-1rank-lora8-s64", "tiny-gpt", 1, 1, 0, 8, 16, 64, sim::Precision::bf16, 8},
      {"g-gpt-dp2-z2-s256", "tiny-gpt", 1, 2, 2, 2, 8, 256},
      {"h-gpt-tp2-sp-s512", "tiny-gpt", 2, 1, 0, 1, 2, 512, sim::Precision::bf16, 0, true},
      {"i-llama-dp2-lora16-s64", "tiny-llama", 1, 2, 0, 4, 16, 64, sim::Precision::bf16, 16},
      {"j-llama-1rank-s16", "tiny-llama", 1, 1, 0, 1, 1, 16},  // kernel launches and memory traffic matter
      {"k-gpt-dp2-s32", "tiny-gpt", 1, 2, 0, 1, 2, 32},        // the gradient all-reduce matters
  };
  return c;
}

Plan make_plan(const Case& k, const sim::HardwareProfile& hw) {
  Plan p;
  p.model = sim::load_model(k.model);
  p.cluster = sim::ClusterSpec{hw, 1, k.tp * k.dp};
  sim::ParallelConfig& cfg = p.config;
  cfg.tp = k.tp;
  cfg.dp = k.dp;
  cfg.zero_stage = k.zero;
  cfg.micro_batch_size = k.mbs;
  cfg.global_batch_size = k.gbs;
  cfg.seq_len = k.seq;
  cfg.precision = k.precision;
  cfg.sequence_parallel = k.sequence_parallel;
  cfg.lora.rank = k.lora_rank;
  if (k.lora_rank > 0)
    cfg.lora.targets = std::string(k.model) == "tiny-gpt" ? std::vector<std::string>{"c_attn"}
                                                          : std::vector<std::string>{"q_proj", "v_proj"};
  p.prediction = sim::simulate(p.model, p.cluster, cfg);
  return p;
}

// The "true" machine, perturbed by hand (not through apply_params, which is under test).
constexpr double kCompute = 0.7, kMemory = 1.3, kComm = 0.5, kLaunchUs = 7.0;
sim::HardwareProfile truth(const sim::HardwareProfile& base) {
  sim::HardwareProfile hw = base;
  for (double& p : hw.device.peak_flops) p *= kCompute;
  hw.device.memory_bandwidth_Bps *= kMemory;
  hw.node.intra.bandwidth_Bps *= kComm;
  hw.network.bandwidth_Bps *= kComm;
  hw.device.kernel_launch_s = kLaunchUs * 1e-6;
  return hw;
}

double simulated_step_s(const Plan& p, const sim::HardwareProfile& hw) {
  sim::ClusterSpec c{hw, p.cluster.nodes, p.cluster.devices_per_node};
  sim::ParallelConfig cfg = p.config;
  return sim::simulate(p.model, c, cfg).time.step_s;
}

// Deterministic +-amplitude noise: mt19937's output sequence is fixed by the standard.
std::vector<MeasuredRun> synthetic_runs(const std::vector<Case>& cs, double noise_amplitude = 0) {
  const sim::HardwareProfile base = sim::load_hardware("local-cpu-2core");
  const sim::HardwareProfile real = truth(base);
  std::mt19937 rng(20240611);
  std::vector<MeasuredRun> runs;
  for (const Case& k : cs) {
    Plan p = make_plan(k, base);
    const double u = static_cast<double>(rng()) / 4294967295.0 * 2 - 1;  // [-1, 1]
    const double measured = simulated_step_s(p, real) * (1 + noise_amplitude * u);
    runs.push_back(MeasuredRun{k.name, std::move(p), measured, false, "synthetic"});
  }
  return runs;
}

const ParamResult& param(const CalibrationResult& r, const std::string& name) {
  return r.parameters.at(static_cast<std::size_t>(parameter_index(name)));
}

TEST(Calibration, ApplyParamsChangesExactlyTheNamedFigures) {
  sim::HardwareProfile base = sim::load_hardware("local-cpu-2core");
  base.device.peak_fp8_flops = 1e12;  // FP8 tensor cores, to see its own term move it
  const sim::HardwareProfile hw = apply_params(base, {0.5, 3.0, 2.0, 4.0, 9.0});
  EXPECT_DOUBLE_EQ(hw.device.peak(sim::Precision::bf16), 0.5 * base.device.peak(sim::Precision::bf16));
  EXPECT_DOUBLE_EQ(hw.device.peak(sim::Precision::fp32), 0.5 * base.device.peak(sim::Precision::fp32));
  EXPECT_DOUBLE_EQ(hw.device.peak_fp8_flops, 3.0 * base.device.peak_fp8_flops);  // fp8_compute_scale only
  EXPECT_DOUBLE_EQ(hw.device.memory_bandwidth_Bps, 2.0 * base.device.memory_bandwidth_Bps);
  EXPECT_DOUBLE_EQ(hw.node.intra.bandwidth_Bps, 4.0 * base.node.intra.bandwidth_Bps);
  EXPECT_DOUBLE_EQ(hw.network.bandwidth_Bps, 4.0 * base.network.bandwidth_Bps);
  EXPECT_DOUBLE_EQ(hw.device.kernel_launch_s, 9e-6);
  EXPECT_DOUBLE_EQ(hw.host.memory_bandwidth_Bps, base.host.memory_bandwidth_Bps);
  EXPECT_DOUBLE_EQ(hw.node.intra.latency_s, base.node.intra.latency_s);
  const Params prior = prior_params(base);
  EXPECT_EQ(prior, (Params{1, 1, 1, 1, 2}));  // local-cpu-2core: kernel_launch_us 2
}

// A measured profile's own figures move with their parameter: the bus-bandwidth curves with
// comm_scale, the attention GEMMs' cost with compute_scale, the other op costs with memory_scale.
TEST(Calibration, ApplyParamsScalesMeasuredCurvesAndOpCosts) {
  sim::HardwareProfile base = sim::load_hardware("local-cpu-2core");
  const auto all_reduce = static_cast<std::size_t>(sim::CollectiveKind::all_reduce);
  base.node.intra.busbw_by_bytes[all_reduce] = {{3.0, 6.0}, {1e9, 3e9}};
  auto& ops = base.device.op_costs[static_cast<std::size_t>(sim::Precision::fp32)];
  ops[static_cast<std::size_t>(sim::OpKind::dropout)] = {{{5.0}, {6e-9}}, {{5.0}, {2e-9}}};
  ops[static_cast<std::size_t>(sim::OpKind::attention_gemms)] = {{{8.0}, {1e-11}}, {{8.0}, {2e-11}}};
  const sim::HardwareProfile hw = apply_params(base, {0.5, 1.0, 2.0, 4.0, 9.0});
  EXPECT_DOUBLE_EQ(hw.node.intra.busbw(sim::CollectiveKind::all_reduce)->at(1e3), 4.0 * 1e9);
  EXPECT_DOUBLE_EQ(hw.node.intra.busbw(sim::CollectiveKind::all_reduce)->at(1e6), 4.0 * 3e9);
  const auto* drop = hw.device.op_cost(sim::Precision::fp32, sim::OpKind::dropout);
  const auto* attn = hw.device.op_cost(sim::Precision::fp32, sim::OpKind::attention_gemms);
  ASSERT_TRUE(drop && attn);
  EXPECT_DOUBLE_EQ(drop->forward_s(1e5), 1e5 * 6e-9 / 2.0);  // memory_scale 2: twice as fast
  EXPECT_DOUBLE_EQ(drop->backward_s(1e5), 1e5 * 2e-9 / 2.0);
  EXPECT_DOUBLE_EQ(attn->forward_s(1e8), 1e8 * 1e-11 / 0.5);  // compute_scale 0.5: half as fast
  EXPECT_DOUBLE_EQ(attn->backward_s(1e8), 1e8 * 2e-11 / 0.5);
}

TEST(Calibration, RecoversKnownFactorsAndFixesTheHoldOut) {
  std::vector<MeasuredRun> runs = synthetic_runs(cases());
  EXPECT_EQ(assign_holdout(runs, {}, 4), "");
  const CalibrationResult r = calibrate(sim::load_hardware("local-cpu-2core"), runs);
  EXPECT_TRUE(r.converged);
  EXPECT_NEAR(param(r, "compute_scale").value, kCompute, 0.02 * kCompute);
  EXPECT_NEAR(param(r, "memory_scale").value, kMemory, 0.02 * kMemory);
  EXPECT_NEAR(param(r, "comm_scale").value, kComm, 0.02 * kComm);
  EXPECT_NEAR(param(r, "kernel_launch_us").value, kLaunchUs, 0.02 * kLaunchUs);
  // Every term the CPU runs depend on is identified; FP8's is not (no FP8 run, no FP8 peak).
  for (const auto& p : r.parameters) EXPECT_EQ(p.identified, p.name != "fp8_compute_scale") << p.name;
  ASSERT_EQ(r.holdout_before.runs, 3);
  ASSERT_EQ(r.fit_before.runs, 8);
  EXPECT_GT(r.holdout_before.mean, 0.10);  // the datasheet profile is far off the "real" machine
  EXPECT_LT(r.holdout_after.worst, 1e-3);  // the model is exact here: the fit must be too
  EXPECT_LT(r.fit_after.worst, 1e-3);
  EXPECT_EQ(r.calibrated.name, "local-cpu-2core-calibrated");
  EXPECT_TRUE(r.calibrated.measured);
}

TEST(Calibration, NoisyMeasurementsGiveHoldOutErrorsNearTheNoise) {
  constexpr double kNoise = 0.03;
  std::vector<MeasuredRun> runs = synthetic_runs(cases(), kNoise);
  assign_holdout(runs, {}, 4);
  const CalibrationResult r = calibrate(sim::load_hardware("local-cpu-2core"), runs);
  ASSERT_EQ(r.holdout_before.runs, 3);
  EXPECT_LT(r.holdout_after.mean, r.holdout_before.mean / 3);
  EXPECT_LT(r.holdout_after.worst, 2 * kNoise);
  EXPECT_LT(r.fit_after.worst, 2 * kNoise);
  // Compute dominates these step times, so its factor is still pinned down.
  EXPECT_NEAR(param(r, "compute_scale").value, kCompute, 0.1 * kCompute);
  EXPECT_GT(param(r, "compute_scale").std_error, 0);
}

TEST(Calibration, SingleRankRunsLeaveCommunicationUnidentified) {
  std::vector<Case> single;
  for (const Case& k : cases())
    if (k.tp * k.dp == 1) single.push_back(k);
  single.push_back({"l-llama-1rank-mbs2-s512", "tiny-llama", 1, 1, 0, 2, 2, 512});
  single.push_back({"m-gpt-1rank-mbs1-s32-fp32", "tiny-gpt", 1, 1, 0, 1, 8, 32, sim::Precision::fp32});
  std::vector<MeasuredRun> runs = synthetic_runs(single);
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(assign_holdout(runs, {}, 4), "");
  const CalibrationResult r = calibrate(sim::load_hardware("local-cpu-2core"), runs);
  EXPECT_FALSE(param(r, "comm_scale").identified);
  EXPECT_TRUE(param(r, "comm_scale").fitted);
  EXPECT_EQ(param(r, "comm_scale").value, 1.0);
  EXPECT_EQ(r.calibrated.node.intra.bandwidth_Bps, r.base.node.intra.bandwidth_Bps);
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(),
                          [](const std::string& n) { return n.starts_with("comm_scale: not identified"); }));
  // The others still come back from four single-rank fitting runs.
  EXPECT_NEAR(param(r, "compute_scale").value, kCompute, 0.02 * kCompute);
  EXPECT_NEAR(param(r, "memory_scale").value, kMemory, 0.02 * kMemory);
  EXPECT_NEAR(param(r, "kernel_launch_us").value, kLaunchUs, 0.02 * kLaunchUs);
  EXPECT_LT(r.holdout_after.worst, 1e-3);
}

TEST(Calibration, OnlyTheAskedParametersMove) {
  std::vector<MeasuredRun> runs = synthetic_runs(cases());
  CalibrationOptions o;
  o.parameters = {"compute_scale"};
  EXPECT_EQ(free_parameters(o), 1);
  const CalibrationResult r = calibrate(sim::load_hardware("local-cpu-2core"), runs, o);
  EXPECT_FALSE(param(r, "memory_scale").fitted);
  EXPECT_EQ(param(r, "memory_scale").value, 1.0);
  EXPECT_EQ(param(r, "kernel_launch_us").value, 2.0);
  // One factor cannot explain four: better on average, but the launch-bound run stays far off.
  EXPECT_LT(r.fit_after.mean, r.fit_before.mean);
  EXPECT_GT(r.fit_after.worst, 0.05);
  o.parameters = {"compute_scale", "flux_capacitor"};
  EXPECT_THROW(free_parameters(o), sim::InputError);
}

std::vector<MeasuredRun> named_runs(std::vector<std::string> names) {
  std::vector<MeasuredRun> runs;
  for (auto& n : names) runs.push_back(MeasuredRun{n, Plan{}, 1.0, false, "x.json"});
  return runs;
}

std::vector<std::string> held(const std::vector<MeasuredRun>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs)
    if (r.holdout) out.push_back(r.name);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Calibration, HoldOutSplitRule) {
  // Every third in name order (indices 2, 5), whatever the input order.
  auto runs = named_runs({"r6", "r0", "r3", "r5", "r1", "r4", "r2"});
  EXPECT_EQ(assign_holdout(runs, {}, 4), "");
  EXPECT_EQ(held(runs), (std::vector<std::string>{"r2", "r5"}));
  // 5 runs: one held out, 4 left for 4 parameters.
  runs = named_runs({"e", "d", "c", "b", "a"});
  EXPECT_EQ(assign_holdout(runs, {}, 4), "");
  EXPECT_EQ(held(runs), (std::vector<std::string>{"c"}));
  // 4 runs for 4 parameters: no hold-out possible, all fit.
  runs = named_runs({"a", "b", "c", "d"});
  const std::string note = assign_holdout(runs, {}, 4);
  EXPECT_NE(note.find("no hold-out possible"), std::string::npos) << note;
  EXPECT_TRUE(held(runs).empty());
  // ... but enough for 3 parameters.
  EXPECT_EQ(assign_holdout(runs, {}, 3), "");
  EXPECT_EQ(held(runs), (std::vector<std::string>{"c"}));
  // Two runs: nothing to hold out.
  runs = named_runs({"a", "b"});
  EXPECT_NE(assign_holdout(runs, {}, 1).find("no hold-out"), std::string::npos);
  EXPECT_TRUE(held(runs).empty());
}

TEST(Calibration, NamedHoldOutAndItsMistakes) {
  auto runs = named_runs({"a", "b", "c", "d", "e", "f"});
  EXPECT_EQ(assign_holdout(runs, {"a", "f"}, 4), "");
  EXPECT_EQ(held(runs), (std::vector<std::string>{"a", "f"}));
  try {
    assign_holdout(runs, {"zz"}, 4);
    FAIL() << "expected InputError";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--holdout: no usable run named 'zz'"), std::string::npos) << e.what();
  }
  try {
    assign_holdout(runs, {"a", "b", "c"}, 4);
    FAIL() << "expected InputError";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("leaves 3 fitting runs, expected at least 4"), std::string::npos) << e.what();
  }
}

// A validation file as `shardplan validate --json` writes it, plans saved next to it.
nlohmann::json validation_json(const TempDir& dir, const std::vector<MeasuredRun>& runs) {
  nlohmann::json j{{"schema", "shardplan.validation/1"},
                   {"hardware", "local-cpu-2core"},
                   {"hardware_file", "../profile.json"},
                   {"steps", 8},
                   {"runs", nlohmann::json::array()}};
  std::filesystem::create_directories(dir.path() / "v" / "plans");
  for (const auto& r : runs) {
    save_plan(r.plan, dir.file("v/plans/" + r.name + ".json"));
    j["runs"].push_back({{"name", r.name},
                         {"status", "ran"},
                         {"reason", ""},
                         {"ranks", r.plan.config.devices()},
                         {"time_judged", true},
                         {"plan_file", "plans/" + r.name + ".json"},
                         {"measured", {{"step_seconds", r.measured_step_s}}}});
  }
  return j;
}

TEST(Calibration, LoadsValidationFiles) {
  const TempDir dir("shardplan_calib");
  const std::vector<MeasuredRun> runs = synthetic_runs({cases()[0], cases()[2], cases()[4]});
  nlohmann::json j = validation_json(dir, runs);
  j["runs"].push_back({{"name", "skipped-one"}, {"status", "skipped"}, {"reason", "needs 4 ranks"}});
  j["runs"].push_back({{"name", "untimed"}, {"status", "ran"}, {"time_judged", false}, {"plan_file", "nope.json"}});
  const std::string a = dir.write_json("v/a.json", j);
  const std::string b = dir.write_json("v/b.json", validation_json(dir, {runs[1]}));
  std::filesystem::copy_file(sim::load_hardware("local-cpu-2core").source_file, dir.file("profile.json"));
  const MeasuredRuns m = load_measured_runs({a, b});
  ASSERT_EQ(m.runs.size(), 4u);
  EXPECT_EQ(m.runs[1].name, runs[1].name);
  EXPECT_EQ(m.runs[3].name, runs[1].name + "#2");  // the same run measured again
  EXPECT_EQ(m.runs[2].measured_step_s, runs[2].measured_step_s);
  EXPECT_EQ(m.runs[2].plan.config.tp, 2);
  EXPECT_EQ(m.runs[3].source, b);
  EXPECT_EQ(m.ignored.size(), 2u);
  EXPECT_EQ(m.hardware_file, (dir.path() / "profile.json").lexically_normal().string());  // beside the runs file
  nlohmann::json other = j;
  other["hardware_file"] = "hardware_profiles/local-cpu-2core.json";  // not beside it: as given (cwd-relative)
  EXPECT_EQ(load_measured_runs({dir.write_json("v/c.json", other)}).hardware_file, other["hardware_file"]);
  other["hardware_file"] = "local-cpu-2core";  // a built-in name
  EXPECT_EQ(load_measured_runs({dir.write_json("v/c.json", other)}).hardware_file, "local-cpu-2core");

  auto error_of = [&](const nlohmann::json& bad) {
    const std::string f = dir.write_json("v/bad.json", bad);
    try {
      load_measured_runs({f});
    } catch (const sim::InputError& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  nlohmann::json bad = j;
  bad["schema"] = "shardplan.plan/1";
  EXPECT_NE(error_of(bad).find("bad.json: field 'schema': expected \"shardplan.validation/1\""), std::string::npos);
  bad = j;
  bad["runs"][1]["plan_file"] = "plans/missing.json";
  EXPECT_NE(error_of(bad).find("bad.json: field 'runs[1].plan_file': expected an existing plan file"),
            std::string::npos);
  bad = j;
  bad["runs"][0]["measured"]["step_seconds"] = 0;
  EXPECT_NE(error_of(bad).find("field 'runs[0].measured.step_seconds': expected a number > 0"), std::string::npos);
  bad = j;
  bad["runs"] = nlohmann::json::array({j["runs"][3]});
  EXPECT_NE(error_of(bad).find("no run with status \"ran\" and time_judged true"), std::string::npos);
  EXPECT_THROW(load_measured_runs({dir.file("absent.json")}), sim::InputError);
}

TEST(Calibration, WrittenProfileLoadsBackAndReproducesTheAfterPredictions) {
  const TempDir dir("shardplan_calib");
  std::vector<MeasuredRun> runs = synthetic_runs(cases());
  assign_holdout(runs, {}, 4);
  const sim::HardwareProfile base = sim::load_hardware("local-cpu-2core");
  const CalibrationResult r = calibrate(base, runs);
  const nlohmann::json j = calibrated_profile_json(r);
  const std::string path = dir.write_json("calibrated.json", j);
  const sim::HardwareProfile loaded = sim::load_hardware(path);
  EXPECT_EQ(loaded.name, "local-cpu-2core-calibrated");
  EXPECT_TRUE(loaded.measured);
  for (std::size_t i = 0; i < runs.size(); ++i)
    EXPECT_NEAR(simulated_step_s(runs[i].plan, loaded), r.runs[i].after_s, 1e-12 * r.runs[i].after_s) << runs[i].name;
  const auto& cal = j.at("calibration");
  EXPECT_EQ(cal.at("method"), "Levenberg-Marquardt on log step time");
  EXPECT_EQ(cal.at("holdout_runs").size(), 3u);
  EXPECT_EQ(cal.at("fit_runs").size(), 8u);
  EXPECT_NEAR(cal.at("parameters").at("comm_scale").at("value").get<double>(), kComm, 0.02 * kComm);
  EXPECT_TRUE(cal.at("parameters").at("comm_scale").at("identified").get<bool>());
  EXPECT_LT(cal.at("step_seconds_error_after").at("holdout").at("worst").get<double>(), 1e-3);
  // Changed figures say so; the base's other sources survive under the written unit keys.
  const auto& src = j.at("sources");
  EXPECT_NE(src.at("device.kernel_launch_s").get<std::string>().find("calibrated"), std::string::npos);
  EXPECT_NE(src.at("device.peak_TFLOPs.bf16").get<std::string>().find("from 8 measured runs"), std::string::npos);
  EXPECT_NE(src.at("network.bandwidth_bytes_per_s").get<std::string>().find("comm_scale"), std::string::npos);
  EXPECT_EQ(src.at("device.memory_bytes"), sim::read_json_file(base.source_file)["sources"]["device.memory_MiB"]);
}

}  // namespace calibration_test
}  // namespace shardplan::calibration
