// `shardplan validate --runs / --suite published` and `calibrate --leave-one-source-out` on
// recorded runs (shardplan.runs/1), through the real binary.
#include <gtest/gtest.h>

#include <set>

#include "cli/cli_support.hpp"

namespace runs_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

TEST(CliRuns, PublishedSuiteValidatesWithOneRowPerRunAndStatisticsPerSource) {
  TempDir tmp;
  const std::string out = tmp.file("published.json"), svg = tmp.file("published.svg");
  const RunResult r = run_shardplan({"validate", "--suite", "published", "--json", out, "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << r;
  const json suite = read_json(repo_root() + "/runs/published.json");
  const json j = read_json(out);
  EXPECT_EQ(j["schema"], "shardplan.runs-validation/1");
  ASSERT_EQ(j["runs"].size(), suite["runs"].size());
  std::set<std::string> sources;
  for (const auto& run : suite["runs"]) sources.insert(run["source"].get<std::string>());
  EXPECT_EQ(j["summary"]["per_source"].size(), sources.size());
  for (const auto& row : j["runs"]) {
    EXPECT_GT(row["predicted"]["tokens_per_second"].get<double>(), 0) << row.dump();
    // The error is what the two throughputs say it is.
    const double e =
        row["predicted"]["tokens_per_second"].get<double>() / row["measured"]["tokens_per_second"].get<double>() - 1;
    EXPECT_NEAR(row["throughput_error"].get<double>(), e, 1e-9);
    // The predicted step's breakdown comes with it: the same step, communication split into
    // what is hidden and what is not.
    const json& t = row["predicted"]["time"];
    EXPECT_NEAR(t["step_seconds"].get<double>(), row["predicted"]["step_seconds"].get<double>(), 1e-12) << row.dump();
    EXPECT_GT(t["forward_compute_seconds"].get<double>(), 0) << row.dump();
    EXPECT_GE(t["dp_comm_overlapped_seconds"].get<double>(), 0) << row.dump();
    EXPECT_LE(t["dp_comm_overlapped_seconds"].get<double>(), t["dp_comm_total_seconds"].get<double>()) << row.dump();
  }
  EXPECT_TRUE(contains(r.out, "mosaicml-mpt")) << r;
  EXPECT_TRUE(std::filesystem::file_size(svg) > 1000);
}

// The held-out file (NeMo 24.07 rows nothing is fitted to): every run names no published run
// and simulates, with one row each.
TEST(CliRuns, HeldOutNemoRowsAreNotInThePublishedSuiteAndAllSimulate) {
  TempDir tmp;
  const std::string file = repo_root() + "/runs/heldout-nemo-24.07.json", out = tmp.file("heldout.json");
  const RunResult r = run_shardplan({"validate", "--runs", file, "--json", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::set<std::string> published;
  const json suite = read_json(repo_root() + "/runs/published.json");  // alive through the loop
  for (const auto& run : suite["runs"]) published.insert(run["name"].get<std::string>());
  const json held = read_json(file), j = read_json(out);
  ASSERT_EQ(j["runs"].size(), held["runs"].size());
  for (const auto& run : held["runs"]) EXPECT_EQ(published.count(run["name"].get<std::string>()), 0u) << run["name"];
  for (const auto& row : j["runs"]) EXPECT_GT(row["predicted"]["tokens_per_second"].get<double>(), 0) << row.dump();
}

// shardrun's own GPU runs (runs/shardrun-h100.json, runs/shardrun-h200.json) are held out too:
// each one simulates, is predicted to fit, and its recorded figures are those of the report.json
// its citation names (bench/results/gpu-2026-11-26/), with the layout of the plan that was run.
TEST(CliRuns, ShardrunGpuRunsSimulateAndMatchTheirReports) {
  for (const std::string name : {"shardrun-h100", "shardrun-h200"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const std::string file = repo_root() + "/runs/" + name + ".json", out = tmp.file("gpu.json");
    const RunResult r = run_shardplan({"validate", "--runs", file, "--json", out});
    ASSERT_EQ(r.exit_code, 0) << r;
    const json runs = read_json(file), j = read_json(out);
    ASSERT_EQ(j["runs"].size(), runs["runs"].size());
    for (const auto& row : j["runs"]) EXPECT_GT(row["predicted"]["tokens_per_second"].get<double>(), 0) << row.dump();
    for (const auto& run : runs["runs"]) {
      const std::string citation = run["citation"].get<std::string>();
      const auto at = citation.find("report bench/results/");
      ASSERT_NE(at, std::string::npos) << citation;
      const json report = read_json(repo_root() + "/" + citation.substr(at + 7));
      EXPECT_NEAR(run["measured"]["step_seconds"].get<double>(), report["measured"]["step_seconds"].get<double>(),
                  1e-4);
      EXPECT_NEAR(run["measured"]["peak_memory_GiB"].get<double>(),
                  report["measured"]["peak_memory_bytes"].get<double>() / (1024.0 * 1024 * 1024), 1e-3);
      const auto plan_at = citation.find("--plan ");
      ASSERT_NE(plan_at, std::string::npos) << citation;
      const std::string plan_path = citation.substr(plan_at + 7, citation.find(' ', plan_at + 7) - plan_at - 7);
      EXPECT_EQ(run["config"], read_json(repo_root() + "/" + plan_path)["config"]) << plan_path;
    }
  }
}

TEST(CliRuns, ValidateOnlySelectsAsCalibrateDoes) {
  // Run names, sources, profiles and name prefixes ending in '*', as calibrate --only takes them.
  TempDir tmp;
  const json suite = read_json(repo_root() + "/runs/published.json");
  auto expected = [&](auto keep) {
    std::set<std::string> names;
    for (const auto& run : suite["runs"])
      if (keep(run)) names.insert(run["name"].get<std::string>());
    return names;
  };
  auto selected = [&](const std::string& only) {
    const std::string out = tmp.file("only.json");
    const RunResult r = run_shardplan({"validate", "--suite", "published", "--only", only, "--json", out});
    EXPECT_EQ(r.exit_code, 0) << r;
    const json j = read_json(out);
    std::set<std::string> names;
    for (const auto& row : j["runs"]) names.insert(row["name"].get<std::string>());
    return names;
  };
  const auto zero3 = expected(
      [](const json& run) { return run["name"].get<std::string>().starts_with("megatron-sc21-table2-zero3"); });
  ASSERT_FALSE(zero3.empty());
  EXPECT_EQ(selected("megatron-sc21-table2-zero3*"), zero3);
  EXPECT_EQ(selected("aws-neuron"), expected([](const json& run) { return run["source"] == "aws-neuron"; }));
  EXPECT_EQ(selected("p5.48xlarge"),
            expected([](const json& run) { return run["hardware"]["profile"] == "p5.48xlarge"; }));
  expect_one_line_error({"validate", "--suite", "published", "--only", "no-such-run"}, {"--only", "no-such-run"});
}

TEST(CliRuns, BadRunsFileIsOneLineNamingTheRunAndField) {
  TempDir tmp;
  json suite = read_json(repo_root() + "/runs/published.json");
  json run = suite["runs"][0];
  run.erase("measured");
  const std::string path = tmp.write_json("bad.json", {{"schema", "shardplan.runs/1"}, {"runs", json::array({run})}});
  expect_one_line_error({"validate", "--runs", path}, {"bad.json", run["name"].get<std::string>(), "measured"});
  expect_one_line_error({"validate", "--suite", "nonesuch"}, {"--suite", "nonesuch", "published"});
}

TEST(CliRuns, LeaveOneSourceOutPrintsEverySource) {
  TempDir tmp;
  const RunResult r = run_shardplan({"calibrate", "--suite", "published", "--only", "p5.48xlarge", "--hardware",
                                     "p5.48xlarge", "--fit", "compute_scale", "--leave-one-source-out", "--out",
                                     tmp.file("fit.json"), "--max-iterations", "20"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(contains(r.out, "leave-one-source-out")) << r;
  EXPECT_TRUE(contains(r.out, "ibm-fms-fsdp")) << r;
  EXPECT_TRUE(contains(r.out, "mosaicml-mpt")) << r;
  EXPECT_TRUE(contains(r.out, "mean over sources")) << r;
  const json profile = read_json(tmp.file("fit.json"));
  EXPECT_EQ(profile["name"], "p5.48xlarge-calibrated");
  expect_one_line_error({"calibrate", "--suite", "published", "--only", "no-such-source", "--hardware", "p5.48xlarge",
                         "--out", tmp.file("x.json")},
                        {"--only", "no-such-source"});
}

}  // namespace runs_cli_test
