// A runs file's "framework": its defaults fill what the run does not write, its memory figure is
// what peak_memory_GiB means unless peak_memory_kind says otherwise, and the shipped suite names
// the framework of every run.
#include <gtest/gtest.h>

#include "calibration/run_comparison.hpp"
#include "calibration/runs_file.hpp"
#include "simulator/errors.hpp"

namespace shardplan::calibration {
namespace runs_frameworks_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;
using nlohmann::json;

json run_with(const json& framework) {
  json r = {{"name", "r1"},
            {"source", "unit-test"},
            {"citation", "written for this test"},
            {"model", "llama2-7b"},
            {"hardware", {{"profile", "p4de.24xlarge"}, {"nodes", 2}}},
            {"config",
             {{"tensor_parallel", 2},
              {"pipeline_parallel", 2},
              {"data_parallel", 4},
              {"micro_batch_size", 1},
              {"global_batch_size", 64},
              {"seq_len", 2048}}},
            {"measured", {{"tokens_per_second", 50000.0}, {"peak_memory_GiB", 30.0}}}};
  if (!framework.is_null()) r["framework"] = framework;
  return r;
}

RunsFile parse(const json& run) {
  return runs_from_json({{"schema", kRunsSchema}, {"runs", json::array({run})}}, "r.json");
}

TEST(RunsFramework, DefaultsFillWhatTheRunDoesNotWrite) {
  const RecordedRun plain = parse(run_with(nullptr)).runs[0];
  const RecordedRun m2021 = parse(run_with({{"name", "megatron"}, {"version", "2021"}})).runs[0];
  EXPECT_EQ(plain.plan.config.attention, sim::AttentionKind::flash);
  EXPECT_EQ(m2021.plan.config.attention, sim::AttentionKind::eager);
  EXPECT_EQ(m2021.plan.config.fusion, sim::Fusion::megatron);
  EXPECT_EQ(m2021.plan.config.framework.name, "megatron@2021");
  EXPECT_EQ(m2021.framework_name(), "megatron");
  EXPECT_EQ(plain.framework_name(), "unnamed");
  json explicit_run = run_with("megatron@2021");
  explicit_run["config"]["attention"] = "flash";
  EXPECT_EQ(parse(explicit_run).runs[0].plan.config.attention, sim::AttentionKind::flash);
}

TEST(RunsFramework, TheMeasuredPeakIsWhatTheFrameworkReports) {
  const RecordedRun titan = parse(run_with("torchtitan")).runs[0];
  EXPECT_EQ(titan.measured_peak_kind, sim::MemoryReport::reserved);
  json given = run_with("torchtitan");
  given["measured"]["peak_memory_kind"] = "allocated";
  EXPECT_EQ(parse(given).runs[0].measured_peak_kind, sim::MemoryReport::allocated);
  EXPECT_EQ(parse(run_with(nullptr)).runs[0].measured_peak_kind, sim::MemoryReport::device);
  // validate compares the predicted figure of the same kind.
  const RunComparison reserved = compare_run(titan, titan.plan.cluster.hardware);
  const RunComparison allocated = compare_run(parse(given).runs[0], titan.plan.cluster.hardware);
  EXPECT_GT(reserved.predicted_reported_peak_bytes, allocated.predicted_reported_peak_bytes);
  EXPECT_DOUBLE_EQ(reserved.predicted_peak_bytes, allocated.predicted_peak_bytes) << "what must fit is one figure";
  EXPECT_EQ(reserved.framework, "torchtitan");
}

TEST(RunsFramework, AnUnknownFrameworkNamesTheRunAndTheField) {
  std::string msg;
  try {
    parse(run_with({{"name", "megatron"}, {"version", "1999"}}));
  } catch (const sim::InputError& e) { msg = e.what(); }
  EXPECT_NE(msg.find("run 'r1' field 'framework': unknown megatron version '1999'"), std::string::npos) << msg;
  json bad_kind = run_with(nullptr);
  bad_kind["measured"]["peak_memory_kind"] = "cached";
  msg.clear();
  try {
    parse(bad_kind);
  } catch (const sim::InputError& e) { msg = e.what(); }
  EXPECT_NE(msg.find("peak_memory_kind"), std::string::npos) << msg;
}

TEST(RunsFramework, TheShippedSuitesNameEveryRunsFramework) {
  for (const char* suite : {"published", "heldout-nemo-24.07", "shardrun-h100", "shardrun-h200"}) {
    for (const auto& r : load_runs_file(suite_path(suite)).runs)
      EXPECT_TRUE(r.framework.has_value()) << suite << ": " << r.name;
  }
}

}  // namespace runs_frameworks_test
}  // namespace shardplan::calibration
