// `shardplan validate`: summary statistics, the built-in suite, --configs errors, and end-to-end
// runs of the real shardrun under mpirun.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "calibration/validation.hpp"
#include "simulator/errors.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace validate_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
namespace cal = shardplan::calibration;
namespace sim = shardplan::simulator;
using shardplan::testing::CommandResult;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;

std::string validate_cmd(const std::string& args) {
  return std::string(SHARDPLAN_BINARY) + " validate --shardrun " + SHARDRUN_BINARY + " " + args;
}

cal::ValidationRun made_run(const std::string& name, cal::RunStatus status, double step_err, double mem_err,
                            bool judged = true) {
  cal::ValidationRun r;
  r.entry.name = name;
  r.status = status;
  r.time_judged = judged;
  r.has_prediction = true;
  r.has_measurement = status == cal::RunStatus::ran;
  r.step_error = step_err;
  r.memory_error = mem_err;
  return r;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ValidateSummary, MeanMedianWorstAndOversubscribedTimesLeftOut) {
  std::vector<cal::ValidationRun> runs = {
      made_run("a", cal::RunStatus::ran, 0.10, -0.20),
      made_run("b", cal::RunStatus::ran, -0.30, 0.10),
      made_run("c", cal::RunStatus::ran, 0.05, 0.05),
      made_run("d", cal::RunStatus::ran, 2.00, -0.40, /*judged=*/false),
      made_run("e", cal::RunStatus::skipped, 9.0, 9.0),
      made_run("f", cal::RunStatus::failed, 9.0, 9.0),
  };
  const cal::ValidationSummary s = cal::summarize(runs);
  EXPECT_EQ(s.ran, 4);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.failed, 1);
  // Step time: a, b, c only (d is oversubscribed): |errors| 0.10, 0.30, 0.05.
  EXPECT_EQ(s.step_seconds.count, 3);
  EXPECT_NEAR(s.step_seconds.mean_abs, 0.15, 1e-12);
  EXPECT_NEAR(s.step_seconds.median_abs, 0.10, 1e-12);
  EXPECT_NEAR(s.step_seconds.worst_abs, 0.30, 1e-12);
  EXPECT_EQ(s.step_seconds.worst_run, "b");
  // Memory: all four ran runs: |errors| 0.20, 0.10, 0.05, 0.40 -> median of 0.10 and 0.20.
  EXPECT_EQ(s.peak_memory.count, 4);
  EXPECT_NEAR(s.peak_memory.mean_abs, 0.1875, 1e-12);
  EXPECT_NEAR(s.peak_memory.median_abs, 0.15, 1e-12);
  EXPECT_NEAR(s.peak_memory.worst_abs, 0.40, 1e-12);
  EXPECT_EQ(s.peak_memory.worst_run, "d");
}

TEST(ValidateSummary, EmptyInputHasZeroCounts) {
  const cal::ValidationSummary s = cal::summarize({made_run("x", cal::RunStatus::skipped, 0, 0)});
  EXPECT_EQ(s.ran, 0);
  EXPECT_EQ(s.step_seconds.count, 0);
  EXPECT_EQ(s.peak_memory.count, 0);
  EXPECT_TRUE(s.peak_memory.worst_run.empty());
}

TEST(ValidateReport, PerRankMemoryErrorTakesTheWorstRank) {
  cal::ValidationRun r;
  r.predicted_step_s = 0.3;
  r.predicted_peak_bytes = 110;
  r.predicted_peak_per_rank = {110, 110};
  const nlohmann::json report = {
      {"measured", {{"step_seconds", 0.25}, {"peak_memory_bytes", 200}, {"peak_memory_bytes_per_rank", {100, 200}}}}};
  cal::apply_report(r, report, "report.json");
  EXPECT_TRUE(r.has_measurement);
  EXPECT_NEAR(r.step_error, (0.3 - 0.25) / 0.25, 1e-12);
  EXPECT_EQ(r.memory_error_rank, 1);  // rank 0 is +10 %, rank 1 is -45 %
  EXPECT_NEAR(r.memory_error, (110.0 - 200.0) / 200.0, 1e-12);
  EXPECT_EQ(r.measured_peak_bytes, 200);
  EXPECT_THROW(cal::apply_report(r, {{"measured", {{"step_seconds", 0}}}}, "report.json"), sim::InputError);
}

// --repeats: every run's step time is kept and the median is compared; memory is the last run's
// (the accounting allocator makes it the same every time). Round-trips through the JSON.
TEST(ValidateReport, RepeatsCompareTheMedianStepTime) {
  cal::ValidationRun r = made_run("tiny", cal::RunStatus::ran, 0, 0);
  r.entry.model = "tiny-llama";
  r.entry.global_batch_size = 8;
  r.ranks = 1;
  r.has_measurement = false;
  r.measured_step_s_runs.clear();
  r.predicted_step_s = 0.2;
  r.predicted_peak_per_rank = {100};
  for (double step : {0.30, 0.18, 0.25})
    cal::apply_report(r, {{"measured", {{"step_seconds", step}, {"peak_memory_bytes", 100}}}}, "report.json");
  EXPECT_EQ(r.measured_step_s_runs, (std::vector<double>{0.30, 0.18, 0.25}));
  EXPECT_DOUBLE_EQ(r.measured_step_s, 0.25);
  EXPECT_NEAR(r.step_error, (0.2 - 0.25) / 0.25, 1e-12);
  cal::apply_report(r, {{"measured", {{"step_seconds", 0.19}, {"peak_memory_bytes", 100}}}}, "report.json");
  EXPECT_DOUBLE_EQ(r.measured_step_s, (0.19 + 0.25) / 2);  // even count: the middle two's mean
  cal::ValidationReport report{"hw", "hw", 8, 1, 2, 4, {r}};
  const auto back = cal::validation_from_json(cal::to_json(report, "/tmp"), "v.json", "/tmp");
  EXPECT_EQ(back.repeats, 4);
  ASSERT_EQ(back.runs.size(), 1u);
  EXPECT_EQ(back.runs[0].measured_step_s_runs, r.measured_step_s_runs);
  EXPECT_DOUBLE_EQ(back.runs[0].measured_step_s, r.measured_step_s);
}

// The machine's speed: each repeat's reference GEMM (the faster of its start and end) against the
// measured profile's (the same); the median of the repeats decides. Unmeasured on either side: NaN.
TEST(ValidateReport, MachineSlowdownIsTheRunsReferenceGemmOverTheProfiles) {
  const nlohmann::json profile = {{"profiled", {{"reference_gemm_seconds", {{"start", 0.0020}, {"end", 0.0030}}}}}};
  EXPECT_DOUBLE_EQ(cal::profile_reference_gemm_seconds(profile), 0.0020);  // a slow end (or cold start) ignored
  EXPECT_EQ(cal::profile_reference_gemm_seconds(nlohmann::json{{"name", "p5.48xlarge"}}), 0.0);  // datasheet
  EXPECT_EQ(cal::profile_reference_gemm_seconds({{"profiled", {{"reference_gemm_seconds", {{"start", "x"}}}}}}), 0.0);
  cal::ValidationRun r = made_run("tiny", cal::RunStatus::ran, 0, 0);
  r.entry.model = "tiny-llama";
  r.entry.global_batch_size = 8;
  r.ranks = 1;
  r.measured_step_s_runs.clear();
  r.predicted_peak_per_rank = {100};
  EXPECT_TRUE(std::isnan(cal::machine_slowdown(r, 0.0025)));
  auto report = [](double step, double a, double b) {
    return nlohmann::json{
        {"measured",
         {{"step_seconds", step}, {"peak_memory_bytes", 100}, {"reference_gemm_seconds", {{"start", a}, {"end", b}}}}}};
  };
  cal::apply_report(r, report(0.20, 0.0025, 0.0040), "report.json");  // as profiled, then a busy end
  cal::apply_report(r, report(0.30, 0.0035, 0.0035), "report.json");  // 40 % slower
  cal::apply_report(r, report(0.25, 0.0031, 0.0030), "report.json");  // 20 % slower
  EXPECT_EQ(r.reference_gemm_s_runs, (std::vector<double>{0.0025, 0.0035, 0.0030}));
  EXPECT_NEAR(cal::machine_slowdown(r, 0.0025), 0.2, 1e-12);
  EXPECT_TRUE(std::isnan(cal::machine_slowdown(r, 0)));
  cal::ValidationReport v{"hw", "hw.json", 8, 1, 2, 3, {r}};
  v.profile_reference_gemm_s = 0.0025;
  const auto back = cal::validation_from_json(cal::to_json(v, "/tmp"), "v.json", "/tmp");
  EXPECT_DOUBLE_EQ(back.profile_reference_gemm_s, 0.0025);
  EXPECT_EQ(back.runs[0].reference_gemm_s_runs, r.reference_gemm_s_runs);
  EXPECT_THROW(cal::apply_report(r, report(0.2, -1, 0.0025), "report.json"), sim::InputError);  // names the field
}

// Fast configurations run more steps, so that the steps in the median (all but the first) are
// predicted to last min_measured_s; slow ones keep --steps; the addition is capped.
TEST(ValidateRunner, StepsCoverTheMinimumMeasuredTime) {
  cal::RunnerOptions o;
  o.steps = 8;
  o.min_measured_s = 2.0;
  o.max_steps = 64;
  cal::ValidationRun r;
  EXPECT_EQ(cal::steps_for(r, o), 8);  // no prediction
  r.has_prediction = true;
  r.predicted_step_s = 0.1;
  EXPECT_EQ(cal::steps_for(r, o), 21);  // 1 + 2 s / 0.1 s
  EXPECT_GE((cal::steps_for(r, o) - 1) * r.predicted_step_s, o.min_measured_s - 1e-9);
  r.predicted_step_s = 0.3;
  EXPECT_EQ(cal::steps_for(r, o), 8);  // 1 + ceil(6.67) = 8
  r.predicted_step_s = 1.5;
  EXPECT_EQ(cal::steps_for(r, o), 8);  // over the minimum already
  r.predicted_step_s = 0.001;
  EXPECT_EQ(cal::steps_for(r, o), 64);  // capped
  o.min_measured_s = 0;
  EXPECT_EQ(cal::steps_for(r, o), 8);
  o.min_measured_s = 2.0;
  o.steps = 100;
  EXPECT_EQ(cal::steps_for(r, o), 100);  // never fewer than --steps
}

TEST(ValidateSuite, AtLeastFourteenUniqueEntriesThatPassValidateConfigIncludingPipelinesAndRecompute) {
  const auto suite = cal::builtin_suite();
  ASSERT_GE(suite.size(), 14u);
  std::set<std::string> names;
  int pipelines = 0, recomputing = 0;
  const sim::HardwareProfile hw = sim::load_hardware("local-cpu-2core");
  for (const auto& e : suite) {
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate " << e.name;
    pipelines += e.pp > 1 ? 1 : 0;
    recomputing += e.recompute != sim::Recompute::none ? 1 : 0;
    shardplan::formats::Plan plan;
    EXPECT_NO_THROW(plan = cal::build_plan(e, hw)) << e.name;
    EXPECT_TRUE(plan.prediction.feasible) << e.name << ": " << plan.prediction.infeasible_reason;
    EXPECT_EQ(plan.cluster.devices(), e.ranks()) << e.name;
    EXPECT_EQ(cal::predicted_peak_per_rank(plan).size(), static_cast<size_t>(e.ranks())) << e.name;
  }
  EXPECT_GE(pipelines, 2);
  EXPECT_GE(recomputing, 2);
}

TEST(ValidateSuite, EntryJsonRoundTrips) {
  for (const auto& e : cal::builtin_suite()) {
    const nlohmann::json j = cal::to_json(e);
    EXPECT_EQ(cal::to_json(cal::entry_from_json(j, "suite")), j) << e.name;
  }
}

TEST(ValidateSuite, PipelineStagesGetTheirOwnPeakPerRank) {
  const auto suite = cal::builtin_suite();
  const auto it = std::find_if(suite.begin(), suite.end(), [](const auto& e) { return e.pp > 1; });
  ASSERT_NE(it, suite.end());
  const shardplan::formats::Plan plan = cal::build_plan(*it, sim::load_hardware("local-cpu-2core"));
  const auto per_rank = cal::predicted_peak_per_rank(plan);
  ASSERT_EQ(per_rank.size(), static_cast<size_t>(it->ranks()));
  // tp-dp-pp order with tp = dp = 1: rank r is stage r.
  for (int r = 0; r < it->ranks(); ++r) EXPECT_EQ(per_rank[r], plan.prediction.stages[r].memory.total());
}

void expect_config_error(const nlohmann::json& entries, const std::string& field, int entry) {
  TempDir dir("validate_cfg");
  const std::string file = dir.write_json("configs.json", entries);
  const CommandResult r = run_command(validate_cmd("--list --configs " + file));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(file), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("entry " + std::to_string(entry)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'" + field + "'"), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, "\n"), 1u) << r.out;
}

nlohmann::json good_named(nlohmann::json j, const std::string& name) {
  j["name"] = name;
  return j;
}

TEST(ValidateCli, ConfigsFileErrorsNameFileEntryAndField) {
  nlohmann::json good = cal::to_json(cal::builtin_suite().front());
  nlohmann::json missing = good;
  missing.erase("tp");
  missing["name"] = "second";
  expect_config_error(nlohmann::json::array({good, missing}), "tp", 1);
  nlohmann::json wrong = good;
  wrong["micro_batch_size"] = "four";
  expect_config_error(nlohmann::json::array({wrong}), "micro_batch_size", 0);
  nlohmann::json unknown = good;
  unknown["model"] = "no-such-model";
  unknown["name"] = "third";
  expect_config_error(nlohmann::json::array({good, good_named(good, "second"), unknown}), "model", 2);
}

TEST(ValidateCli, ListPrintsTheSuiteAndUnknownOnlyNamesTheValidOnes) {
  const CommandResult list = run_command(validate_cmd("--list"));
  EXPECT_EQ(list.status, 0) << list.out;
  for (const auto& e : cal::builtin_suite()) EXPECT_NE(list.out.find(e.name), std::string::npos) << e.name;
  const CommandResult bad = run_command(validate_cmd("--list --only tiny-llama-1r,nope"));
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("'nope'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("tiny-llama-dp2-z1"), std::string::npos) << bad.out;
}

TEST(ValidateEndToEnd, RunsThreeConfigurationsIncludingAPipelineAndPlots) {
  TempDir dir("validate_e2e");
  const std::string json_path = dir.file("results.json"), svg = dir.file("plot.svg");
  const CommandResult r = run_command(
      validate_cmd("--only tiny-llama-1r,tiny-llama-dp2-z1,tiny-llama-pp2-1f1b --steps 3 --min-measured-seconds 0 "
                   "--repeats 2 --out-dir " +
                   dir.file("runs") + " --json " + json_path + " --plot " + svg));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("step pred"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[3/3] tiny-llama-pp2-1f1b"), std::string::npos) << r.out;
  // Repeats in rounds: every entry once, then every entry again (each entry's runs minutes apart).
  const size_t round1_last = r.out.find("[round 1/2] [3/3] tiny-llama-pp2-1f1b");
  const size_t round2_first = r.out.find("[round 2/2] [1/3] tiny-llama-1r");
  ASSERT_NE(round1_last, std::string::npos) << r.out;
  ASSERT_NE(round2_first, std::string::npos) << r.out;
  EXPECT_LT(round1_last, round2_first) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  EXPECT_EQ(j["schema"], "shardplan.validation/1");
  EXPECT_EQ(j["steps"], 3);
  EXPECT_EQ(j["repeats"], 2);
  ASSERT_EQ(j["runs"].size(), 3u);
  int ran = 0;
  for (const auto& run : j["runs"]) {
    const std::string name = run["name"];
    EXPECT_EQ(run["layout"]["model"], "tiny-llama") << name;
    EXPECT_TRUE(fs::exists(dir.path() / run["plan_file"].get<std::string>())) << name;
    ++ran;
    ASSERT_EQ(run["status"], "ran") << run.dump();
    const std::string report_file = run["report_file"];
    ASSERT_FALSE(fs::path(report_file).is_absolute()) << report_file;  // under the JSON's directory
    const nlohmann::json report = nlohmann::json::parse(read_text((dir.path() / report_file).string()));
    const double step = run["measured"]["step_seconds"], peak = run["measured"]["peak_memory_bytes"];
    EXPECT_GT(step, 0);
    EXPECT_GT(peak, 0);
    EXPECT_EQ(run["steps"], 3) << name;  // --min-measured-seconds 0: exactly --steps
    EXPECT_EQ(report["measured"]["steps"], 3) << name;
    // Two runs each: the median of two is their mean; report.json is the last run's.
    const std::vector<double> runs = run["measured"]["step_seconds_runs"];
    ASSERT_EQ(runs.size(), 2u) << name;
    EXPECT_DOUBLE_EQ(step, (runs[0] + runs[1]) / 2) << name;
    EXPECT_EQ(runs[1], report["measured"]["step_seconds"].get<double>());
    EXPECT_EQ(peak, report["measured"]["peak_memory_bytes"].get<double>());
    EXPECT_EQ(run["measured"]["peak_memory_bytes_per_rank"].size(), static_cast<size_t>(run["ranks"].get<int>()));
    const double pred_step = run["predicted"]["step_seconds"];
    EXPECT_NEAR(run["error"]["step_seconds_relative"].get<double>(), (pred_step - step) / step, 1e-9);
    EXPECT_TRUE(run["time_judged"].get<bool>());  // 1 or 2 ranks x 1 thread
  }
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(j["summary"]["ran"], 3);
  EXPECT_EQ(j["summary"]["skipped"], 0);
  EXPECT_EQ(j["summary"]["peak_memory"]["count"], 3);
  const std::string plot = read_text(svg);
  EXPECT_TRUE(plot.rfind("<?xml", 0) == 0 || plot.rfind("<svg", 0) == 0) << plot.substr(0, 80);
  EXPECT_NE(plot.find("</svg>"), std::string::npos);
  EXPECT_EQ(count_of(plot, "<circle"), 6u);  // 3 ran runs x 2 panels
  EXPECT_EQ(count_of(plot, "<text"), count_of(plot, "</text>"));
  EXPECT_NE(plot.find("tiny-llama-dp2-z1"), std::string::npos);
  // The JSON reads back.
  const cal::ValidationReport back = cal::validation_from_json(j, json_path, dir.path().string());
  ASSERT_EQ(back.runs.size(), 3u);
  EXPECT_EQ(cal::summarize(back.runs).ran, 3);
}

TEST(ValidateEndToEnd, ConfigurationOverDeviceMemoryIsSkippedWithoutRunning) {
  TempDir dir("validate_mem");
  const std::string hw =
      dir.write_json("tiny-device.json", {{"base", "local-cpu-2core"}, {"device", {{"memory_MiB", 1}}}});
  const std::string json_path = dir.file("results.json");
  // A mpirun that does not exist: any attempt to run would be an error.
  const CommandResult r =
      run_command(validate_cmd("--hardware " + hw + " --only tiny-llama-1r --mpirun " + dir.file("no-mpirun") +
                               " --out-dir " + dir.file("runs") + " --json " + json_path));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  ASSERT_EQ(j["runs"].size(), 1u);
  const auto& run = j["runs"][0];
  EXPECT_EQ(run["status"], "skipped");
  EXPECT_NE(run["reason"].get<std::string>().find("memory"), std::string::npos) << run.dump();
  EXPECT_TRUE(run.contains("predicted"));
  EXPECT_FALSE(run.contains("measured"));
  EXPECT_FALSE(fs::exists(dir.path() / "runs" / "tiny-llama-1r" / "report.json"));
}

TEST(ValidateEndToEnd, FailedRunIsReportedAndExitCodeIsNonZero) {
  TempDir dir("validate_fail");
  // A "shardrun" that crashes: every rank exits 3 with a message.
  const std::string fake = dir.write("crash.sh", "#!/bin/sh\necho 'boom: out of cheese' >&2\nexit 3\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string json_path = dir.file("results.json");
  const CommandResult r = run_command(std::string(SHARDPLAN_BINARY) + " validate --shardrun " + fake +
                                      " --only tiny-llama-1r,tiny-gpt-1r --steps 2 --repeats 2 --out-dir " +
                                      dir.file("runs") + " --json " + json_path);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.find("[round 2/2]"), std::string::npos) << r.out;  // a failed entry is not run again
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  ASSERT_EQ(j["runs"].size(), 2u);  // the second one still ran after the first failed
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["status"], "failed") << run.dump();
    EXPECT_NE(run["reason"].get<std::string>().find("out of cheese"), std::string::npos) << run.dump();
  }
  EXPECT_EQ(j["summary"]["failed"], 2);
}

// Starts `args` with stdout+stderr on a pipe; returns the pid and the read end.
std::pair<pid_t, int> spawn_piped(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

TEST(ValidateEndToEnd, CtrlCEndsTheRunningJobAndWritesWhatFinished) {
  TempDir dir("validate_int");
  const std::string json_path = dir.file("results.json");
  // gpt2 with ZeRO-3 takes seconds per step: it is still running when the signal comes.
  const auto [pid, fd] =
      spawn_piped({SHARDPLAN_BINARY, "validate", "--shardrun", SHARDRUN_BINARY, "--only", "tiny-llama-1r,gpt2-dp2-z3",
                   "--steps", "3", "--min-measured-seconds", "0", "--out-dir", dir.file("runs"), "--json", json_path});
  // The second configuration has started once its progress line is out: interrupt it then.
  std::string out;
  char buf[512];
  bool sent = false;
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
    if (!sent && out.find("[2/2]") != std::string::npos) {
      ::kill(pid, SIGINT);
      sent = true;
    }
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(sent) << out;
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  ASSERT_EQ(j["runs"].size(), 1u) << j.dump();
  EXPECT_EQ(j["runs"][0]["name"], "tiny-llama-1r");
  EXPECT_EQ(j["runs"][0]["status"], "ran");
}

}  // namespace validate_test
