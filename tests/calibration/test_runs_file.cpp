// Recorded runs (shardplan.runs/1): the shipped public-record suite parses and every run
// simulates; published figures convert to step seconds once; bad files name the run and the
// field; overrides reach the profile; leave-one-source-out gives one row per source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "calibration/calibration.hpp"
#include "calibration/run_comparison.hpp"
#include "calibration/runs_file.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::calibration {
namespace runs_file_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using nlohmann::json;
using shardplan::testing::TempDir;

json one_run() {
  return {{"name", "r1"},
          {"source", "unit-test"},
          {"citation", "written for this test"},
          {"model", "llama2-7b"},
          {"hardware", {{"profile", "p4de.24xlarge"}, {"nodes", 2}}},
          {"config",
           {{"tensor_parallel", 1},
            {"pipeline_parallel", 1},
            {"data_parallel", 16},
            {"zero_stage", 3},
            {"micro_batch_size", 2},
            {"global_batch_size", 64},
            {"seq_len", 4096}}},
          {"measured", {{"tokens_per_second", 50000.0}}}};
}

json file_with(const json& run) { return {{"schema", kRunsSchema}, {"runs", json::array({run})}}; }

std::string error_of(const json& j) {
  try {
    runs_from_json(j, "runs.json");
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

TEST(RunsFile, PublishedSuiteParsesAndEveryRunSimulates) {
  const RunsFile f = load_runs_file(suite_path("published"));
  ASSERT_GE(f.runs.size(), 50u);
  std::set<std::string> names;
  for (const auto& r : f.runs) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_FALSE(r.citation.empty()) << r.name;
    EXPECT_GT(r.measured_step_s, 0) << r.name;
    const RunComparison c = compare_run(r, r.plan.cluster.hardware);
    EXPECT_TRUE(std::isfinite(c.predicted_step_s) && c.predicted_step_s > 0) << r.name;
    EXPECT_EQ(c.devices, r.plan.cluster.devices()) << r.name;
  }
  // Several sources, each with at least two runs: leave-one-source-out has something to hold out.
  const auto sources = sources_of(f.runs);
  EXPECT_GE(sources.size(), 4u);
  for (const auto& s : sources)
    EXPECT_GE(std::count_if(f.runs.begin(), f.runs.end(), [&](const auto& r) { return r.source == s; }), 2) << s;
}

TEST(RunsFile, PublishedFiguresConvertToStepSecondsOnce) {
  json r = one_run();
  const double tokens = 64.0 * 4096;
  EXPECT_NEAR(runs_from_json(file_with(r), "t").runs[0].measured_step_s, tokens / 50000.0, 1e-12);
  r["measured"] = {{"tokens_per_second_per_device", 2000.0}};
  EXPECT_NEAR(runs_from_json(file_with(r), "t").runs[0].measured_step_s, tokens / (2000.0 * 16), 1e-12);
  r["measured"] = {{"samples_per_second", 8.0}};
  EXPECT_NEAR(runs_from_json(file_with(r), "t").runs[0].measured_step_s, 64.0 / 8.0, 1e-12);
  r["measured"] = {{"step_seconds", 3.5}, {"peak_memory_GiB", 60}};
  const RecordedRun back = runs_from_json(file_with(r), "t").runs[0];
  EXPECT_DOUBLE_EQ(back.measured_step_s, 3.5);
  ASSERT_TRUE(back.measured_peak_bytes.has_value());
  EXPECT_DOUBLE_EQ(*back.measured_peak_bytes, 60.0 * 1024 * 1024 * 1024);
}

TEST(RunsFile, OverridesReachTheProfileAndTheInlineModelIsRead) {
  json r = one_run();
  r["hardware"]["overrides"] = {{"network", {{"bandwidth_Gbps", 1600}}}};
  r["model"] = {{"model_type", "llama"},          {"hidden_size", 512},     {"intermediate_size", 1376},
                {"num_attention_heads", 8},       {"num_hidden_layers", 4}, {"vocab_size", 1000},
                {"max_position_embeddings", 4096}};
  const RecordedRun back = runs_from_json(file_with(r), "t").runs[0];
  EXPECT_DOUBLE_EQ(back.plan.cluster.hardware.network.bandwidth_Bps, 1600e9 / 8);
  EXPECT_EQ(back.plan.model.num_layers, 4);
  // The override leaves the rest of the profile as it was.
  EXPECT_DOUBLE_EQ(back.plan.cluster.hardware.device.memory_bandwidth_Bps,
                   sim::load_hardware("p4de.24xlarge").device.memory_bandwidth_Bps);
}

TEST(RunsFile, BadRunsNameTheRunAndTheField) {
  json r = one_run();
  r["measured"] = json::object();
  std::string e = error_of(file_with(r));
  EXPECT_NE(e.find("run"), std::string::npos) << e;
  EXPECT_NE(e.find("'r1'"), std::string::npos) << e;
  EXPECT_NE(e.find("step_seconds"), std::string::npos) << e;

  r = one_run();
  r["measured"] = {{"step_seconds", 2}, {"tokens_per_second", 5}};
  EXPECT_NE(error_of(file_with(r)).find("exactly one of"), std::string::npos);

  r = one_run();
  r["model"] = "no-such-model";
  e = error_of(file_with(r));
  EXPECT_NE(e.find("run 'r1' field 'model'"), std::string::npos) << e;

  r = one_run();
  r["config"]["data_parallel"] = 15;  // 15 != 2 nodes x 8
  e = error_of(file_with(r));
  EXPECT_NE(e.find("'r1'"), std::string::npos) << e;

  r = one_run();
  r["hardware"]["overrides"] = {{"network", {{"bandwidth_Gbps", -1}}}};
  e = error_of(file_with(r));
  EXPECT_NE(e.find("run 'r1' field 'hardware.overrides'"), std::string::npos) << e;

  r = one_run();
  r.erase("citation");
  e = error_of(file_with(r));
  EXPECT_NE(e.find("citation"), std::string::npos) << e;

  json two = {{"schema", kRunsSchema}, {"runs", json::array({one_run(), one_run()})}};
  EXPECT_NE(error_of(two).find("unique"), std::string::npos);
  EXPECT_NE(error_of({{"schema", "shardplan.runs/9"}, {"runs", json::array()}}).find("schema"), std::string::npos);
}

TEST(RunsFile, NeuronCoreProfileSplitsTheChip) {
  const auto chip = sim::load_hardware("trn1.32xlarge");
  const auto core = sim::load_hardware("trn1.32xlarge-neuroncore");
  EXPECT_EQ(core.node.devices_per_node, 2 * chip.node.devices_per_node);
  EXPECT_DOUBLE_EQ(core.device.memory_bytes, chip.device.memory_bytes / 2);
  EXPECT_DOUBLE_EQ(core.device.peak(sim::Precision::bf16), chip.device.peak(sim::Precision::bf16) / 2);
  EXPECT_DOUBLE_EQ(core.node.intra.bandwidth_Bps, chip.node.intra.bandwidth_Bps / 2);
  // The resolved profile holds the per-core figures and reads back unchanged (no second split).
  const auto again = sim::hardware_from_json(sim::to_json(core), "resolved");
  EXPECT_EQ(again.node.devices_per_node, core.node.devices_per_node);
  EXPECT_DOUBLE_EQ(again.device.memory_bytes, core.device.memory_bytes);
}

TEST(RunsFile, LeaveOneSourceOutGivesOneRowPerSource) {
  RunsFile f = load_runs_file(suite_path("published"));
  std::vector<RecordedRun> a100;
  for (const auto& r : f.runs)
    if (r.hardware_profile == "p4d.24xlarge" || r.hardware_profile == "p4de.24xlarge") a100.push_back(r);
  auto runs = measured_from_recorded(a100);
  CalibrationOptions o;
  o.parameters = {"compute_scale"};
  o.max_iterations = 20;
  const auto rows = leave_one_source_out(sim::load_hardware("p4de.24xlarge"), runs, o);
  const auto sources = sources_of(a100);
  ASSERT_EQ(rows.size(), sources.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].group, sources[i]);
    EXPECT_EQ(rows[i].runs,
              std::count_if(a100.begin(), a100.end(), [&](const auto& r) { return r.source == sources[i]; }));
    EXPECT_EQ(rows[i].before.runs, rows[i].runs);
    EXPECT_TRUE(rows[i].fitted);
    // Each row has its own fit (without that source): a positive factor.
    EXPECT_GT(rows[i].values[parameter_index("compute_scale")], 0);
  }
}

}  // namespace runs_file_test
}  // namespace shardplan::calibration
