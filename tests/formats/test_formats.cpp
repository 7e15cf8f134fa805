// The files that cross a process (formats/): report.json written and read back through one
// type (RunReport), with the fields its readers require checked by name; a plan's cluster read
// without a simulation (what the launcher counts ranks with).
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "formats/plan.hpp"
#include "formats/run_report.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::formats {
namespace formats_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("shardplan_formats_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

RunReport sample_report() {
  RunReport r;
  r.plan = "plan.json";
  r.model = "tiny-llama";
  r.world_size = 2;
  r.device = "cpu";
  r.measured.steps = 20;
  r.measured.steps_in_medians = 15;
  r.measured.step_s = 0.5;
  r.measured.tokens_per_s = 4096;
  r.measured.compute_s = 0.4;
  r.measured.peak_bytes = 123456789;
  r.measured.peak_bytes_per_rank = {123456789, 120000000};
  r.measured.reference_gemm_start_s = 0.002;
  r.measured.reference_gemm_end_s = 0.0025;
  r.measured.moe = RunReport::Moe{0.01, 1.2, 3, std::nullopt};
  RunReport::Predicted p;
  p.step_s = 0.45;
  p.peak_bytes = 1.3e8;
  p.max_in_flight_per_stage = {1};
  r.predicted = p;
  return r;
}

TEST(RunReport, RoundTripsThroughItsFile) {
  const std::string path = temp_path("report.json");
  save_run_report(sample_report(), path);
  const nlohmann::json j = sim::read_json_file(path);
  EXPECT_EQ(j["schema"], kRunReportSchema);
  EXPECT_NEAR(j["error"]["step_seconds_relative"].get<double>(), (0.45 - 0.5) / 0.5, 1e-12);
  const RunReport back = load_run_report(path);
  EXPECT_EQ(back.model, "tiny-llama");
  EXPECT_EQ(back.world_size, 2);
  EXPECT_DOUBLE_EQ(back.measured.step_s, 0.5);
  EXPECT_EQ(back.measured.peak_bytes, 123456789);
  EXPECT_EQ(back.measured.peak_bytes_per_rank, (std::vector<int64_t>{123456789, 120000000}));
  ASSERT_TRUE(back.measured.reference_gemm_end_s);
  EXPECT_DOUBLE_EQ(*back.measured.reference_gemm_end_s, 0.0025);
  ASSERT_TRUE(back.measured.moe);
  EXPECT_DOUBLE_EQ(back.measured.moe->router_imbalance, 1.2);
  EXPECT_FALSE(back.measured.cp_comm_s);
  ASSERT_TRUE(back.predicted);
  EXPECT_DOUBLE_EQ(back.predicted->step_s, 0.45);
  EXPECT_EQ(to_json(back), j);  // nothing lost or added
}

TEST(RunReport, ReadersGetOneLineErrorsNamingTheField) {
  nlohmann::json j = to_json(sample_report());
  j["measured"]["step_seconds"] = 0;
  try {
    (void)run_report_from_json(j, "r.json");
    FAIL() << "accepted a step time of 0";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("measured.step_seconds"), std::string::npos) << e.what();
  }
  j = to_json(sample_report());
  j["schema"] = "shardplan.report/0";
  EXPECT_THROW((void)run_report_from_json(j, "r.json"), sim::InputError);
  j.erase("schema");
  EXPECT_NO_THROW((void)run_report_from_json(j, "r.json"));                      // a report written by hand
  EXPECT_THROW((void)run_report_from_json(j, "r.json", true), sim::InputError);  // a file must say what it is
  j = to_json(sample_report());
  j["measured"]["reference_gemm_seconds"]["start"] = -1;
  EXPECT_THROW((void)run_report_from_json(j, "r.json"), sim::InputError);
}

TEST(PlanFile, TheClusterIsReadWithoutSimulatingThePlan) {
  Plan plan;
  plan.model = sim::load_model("tiny-llama");
  plan.cluster = sim::ClusterSpec{sim::load_hardware("p4d.24xlarge"), 2, 4};
  plan.config.tp = 2;
  plan.config.dp = 4;
  plan.config.micro_batch_size = 1;
  plan.config.global_batch_size = 8;
  plan.config.seq_len = 128;
  plan.prediction = sim::simulate(plan.model, plan.cluster, plan.config);
  const std::string path = temp_path("plan.json");
  save_plan(plan, path);
  EXPECT_EQ(load_plan_cluster(path).devices(), 8);
  // A configuration that no longer simulates (here: not the cluster's device count) still
  // counts its ranks; the full reader refuses it.
  nlohmann::json j = sim::read_json_file(path);
  j["config"]["data_parallel"] = 3;
  std::ofstream(path) << j.dump();
  EXPECT_EQ(load_plan_cluster(path).devices(), 8);
  EXPECT_THROW((void)load_plan(path), sim::InputError);
}

// A plan whose first chunk holds only the embedding and whose last only the head is written and
// read back as it was (1F1B over 4 stages, interleaved over 2 stages x 2 chunks).
TEST(PlanFile, EmbeddingOnlyAndHeadOnlyChunksRoundTrip) {
  for (const int v : {1, 2}) {
    Plan plan;
    plan.model = sim::load_model("tiny-llama");  // 4 blocks
    plan.cluster = sim::ClusterSpec{sim::load_hardware("p4d.24xlarge"), 1, 4};
    plan.config.pp = 4 / v;
    plan.config.dp = v;
    plan.config.virtual_stages = v;
    plan.config.schedule = v > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
    plan.config.global_batch_size = 8;
    plan.config.seq_len = 128;
    plan.config.partition = {0, 2, 2, 0};
    plan.prediction = sim::simulate(plan.model, plan.cluster, plan.config);
    const std::string path = temp_path("edges.json");
    save_plan(plan, path);
    const Plan back = load_plan(path);
    EXPECT_EQ(back.config.partition, (std::vector<int>{0, 2, 2, 0}));
    EXPECT_EQ(back.config.virtual_stages, v);
    ASSERT_EQ(back.prediction.stages.size(), static_cast<std::size_t>(4 / v));
    EXPECT_EQ(back.prediction.stages.front().layers, v == 1 ? 0 : 2);
    EXPECT_TRUE(back.prediction.stages.front().has_embedding);
    EXPECT_EQ(back.prediction.stages.back().layers, v == 1 ? 0 : 2);
    EXPECT_NEAR(back.prediction.time.step_s, plan.prediction.time.step_s, 1e-12 * plan.prediction.time.step_s);
  }
}

}  // namespace formats_test
}  // namespace shardplan::formats
