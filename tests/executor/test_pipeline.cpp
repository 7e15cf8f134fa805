// Pipeline schedules, activation recomputation and offload in runs of the real shardrun:
// recomputation changes no gradient and lowers the measured peak; 1F1B holds fewer in-flight
// activations than gpipe; the zero-bubble schedules (B and a deferred W) hold per stage what the
// plan predicts; a stage failing mid-schedule ends every rank with an error.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "harness.hpp"

namespace shardplan::testing {
namespace pipeline_test {  // named, not anonymous: the files share a unity-build unit

double peak_of(const RunResult& r) { return r.report["measured"]["peak_memory_bytes"].get<double>(); }

std::vector<double> grad_norms(const std::string& out_dir) {
  std::vector<double> v;
  std::ifstream metrics(std::filesystem::path(out_dir) / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line)["grad_norm"].get<double>());
  return v;
}

// Activations dominate at this size (S = 256, 4 sequences per micro-batch), so recomputing them
// must show in the accounting allocator's peak.
class Recompute : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("shardrun_recompute");
    for (const char* mode : {"none", "selective", "full"}) {
      const std::string plan =
          write_plan(*dir_, mode, "tiny-gpt", {{"recompute", mode}, {"micro_batch_size", 4}}, 256, 8);
      runs_[mode] = shardrun(1, plan, dir_->file(mode),
                             std::string("--steps 3 --lr 1e-3 --dropout 0.1 --save-final ") +
                                 dir_->file(std::string(mode) + ".safetensors"));
    }
    // Megatron's block method: the first 2 of tiny-gpt's 4 blocks recomputed, the others kept.
    const std::string plan =
        write_plan(*dir_, "block", "tiny-gpt",
                   {{"recompute", "full"}, {"recompute_num_layers", 2}, {"micro_batch_size", 4}}, 256, 8);
    runs_["block"] = shardrun(1, plan, dir_->file("block"),
                              "--steps 3 --lr 1e-3 --dropout 0.1 --save-final " + dir_->file("block.safetensors"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    runs_.clear();
  }
  static TempDir* dir_;
  static std::map<std::string, RunResult> runs_;
};
TempDir* Recompute::dir_ = nullptr;
std::map<std::string, RunResult> Recompute::runs_;

TEST_F(Recompute, FullAndSelectiveGiveTheSameLossesGradientsAndWeights) {
  const RunResult& none = runs_["none"];
  ASSERT_EQ(none.exit_code, 0) << none.output;
  const auto ref_norms = grad_norms(dir_->file("none"));
  const auto ref_w = read_floats(dir_->file("none.safetensors"));
  for (const char* mode : {"selective", "full", "block"}) {
    const RunResult& r = runs_[mode];
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(r.losses.size(), none.losses.size());
    // Dropout is on: the recomputed forward must draw the same masks for these to agree.
    for (size_t i = 0; i < r.losses.size(); ++i)
      EXPECT_NEAR(r.losses[i], none.losses[i], 1e-6 * none.losses[i]) << mode;
    const auto norms = grad_norms(dir_->file(mode));
    ASSERT_EQ(norms.size(), ref_norms.size());
    for (size_t i = 0; i < norms.size(); ++i) EXPECT_NEAR(norms[i], ref_norms[i], 1e-6 * ref_norms[i]) << mode;
    const auto w = read_floats(dir_->file(std::string(mode) + ".safetensors"));
    ASSERT_EQ(w.size(), ref_w.size());
    for (const auto& [name, ref] : ref_w) {
      const auto& mine = w.at(name);
      double diff = 0;
      for (size_t i = 0; i < ref.size(); ++i) diff = std::max(diff, std::abs(double(mine[i]) - ref[i]));
      EXPECT_LE(diff, 1e-6) << mode << " " << name;
    }
    EXPECT_EQ(r.report["layout"]["recompute"], std::string(mode) == "block" ? "full" : mode);
  }
}

// Half the blocks recomputed ("block") keeps the other half's activations: its peak lies between
// none and full.
TEST_F(Recompute, MeasuredPeakFallsFromNoneToSelectiveOrBlockToFull) {
  for (const char* mode : {"none", "selective", "block", "full"})
    ASSERT_EQ(runs_[mode].exit_code, 0) << runs_[mode].output;
  const double none = peak_of(runs_["none"]), selective = peak_of(runs_["selective"]), block = peak_of(runs_["block"]),
               full = peak_of(runs_["full"]);
  std::printf(
      "peak tensor memory: none %.1f MiB, selective %.1f MiB, 2 of 4 blocks recomputed %.1f MiB, full %.1f MiB\n",
      none / 1048576, selective / 1048576, block / 1048576, full / 1048576);
  EXPECT_LT(selective, none);
  EXPECT_LT(full, selective);
  EXPECT_LT(block, none);
  EXPECT_LT(full, block);
}

TEST(Offload, OnTheCpuItRunsAndSaysItIsANoOp) {
  TempDir dir("shardrun_offload");
  const std::string plan =
      write_plan(dir, "offload", "tiny-llama", {{"recompute", "full"}, {"offload_activations", true}});
  const RunResult r = shardrun(1, plan, dir.file("out"), "--steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.report["layout"]["offload_activations"].get<std::string>().find("no-op"), std::string::npos);
}

// Same micro-batch count (8), two stages: gpipe keeps all 8 micro-batches' activations on the
// first stage, 1F1B at most p = 2.
TEST(Schedules, OneFOneBHoldsFewerInFlightActivationsThanGpipe) {
  TempDir dir("shardrun_schedules");
  std::map<std::string, RunResult> runs;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const std::string plan =
        write_plan(dir, schedule, "tiny-llama",
                   {{"pipeline_parallel", 2}, {"pipeline_schedule", schedule}, {"micro_batch_size", 1}}, 128, 8);
    runs[schedule] = shardrun(2, plan, dir.file(schedule), "--steps 3 --dropout 0");
    ASSERT_EQ(runs[schedule].exit_code, 0) << runs[schedule].output;
  }
  const auto& g = runs["gpipe"].report["measured"]["pipeline"];
  const auto& f = runs["1f1b"].report["measured"]["pipeline"];
  EXPECT_EQ(g["max_in_flight_per_stage"][0].get<int>(), 8);
  EXPECT_EQ(f["max_in_flight_per_stage"][0].get<int>(), 2);
  const double g_bytes = g["in_flight_activation_bytes_per_stage"][0].get<double>();
  const double f_bytes = f["in_flight_activation_bytes_per_stage"][0].get<double>();
  std::printf("stage 0 in-flight activations: gpipe %.1f MiB, 1f1b %.1f MiB\n", g_bytes / 1048576, f_bytes / 1048576);
  EXPECT_LT(f_bytes, 0.5 * g_bytes);
  EXPECT_LT(peak_of(runs["1f1b"]), peak_of(runs["gpipe"]));
  // The same losses: the schedule changes the order of work, not the arithmetic.
  ASSERT_EQ(runs["gpipe"].losses.size(), runs["1f1b"].losses.size());
  for (size_t i = 0; i < runs["gpipe"].losses.size(); ++i)
    EXPECT_NEAR(runs["gpipe"].losses[i], runs["1f1b"].losses[i], 1e-6 * runs["1f1b"].losses[i]);
  // Both stages report pipeline figures.
  EXPECT_EQ(f["bubble_seconds_per_stage"].size(), 2u);
}

// ZB1P, ZB2P, ZBV, V-Half and V-Min on 2 and 4 ranks (losses and weights: test_equivalence.cpp): each
// stage's measured peak within 5 % of `shardplan simulate`'s for the plan, the micro-batches held
// until their W as the event simulation holds them, and report.json timing B and W apart.
TEST(Schedules, ZeroBubbleRunsHoldPerStageWhatThePlanPredicts) {
  TempDir dir("shardrun_zero_bubble");
  struct Case {
    const char* name;
    int ranks;
    const char* schedule;
    int layers;
  };
  for (const Case& k : {Case{"zb1p_pp2", 2, "zb1p", 4}, Case{"zb2p_pp2", 2, "zb2p", 4}, Case{"zbv_pp2", 2, "zbv", 4},
                        Case{"zb1p_pp4", 4, "zb1p", 4}, Case{"zbv_pp4", 4, "zbv", 8}, Case{"vhalf_pp4", 4, "vhalf", 8},
                        Case{"vmin_pp4", 4, "vmin", 8}, Case{"1f1b_pp2", 2, "1f1b", 4}}) {
    const std::string sched = k.schedule;
    const bool v = sched == "zbv" || sched == "vhalf" || sched == "vmin";
    const std::string plan = write_plan(dir, k.name, "tiny-llama",
                                        {{"pipeline_parallel", k.ranks},
                                         {"pipeline_schedule", k.schedule},
                                         {"virtual_stages", v ? 2 : 1},
                                         {"micro_batch_size", 1}},
                                        32, 8, {{"num_layers", k.layers}});
    const RunResult run = shardrun(k.ranks, plan, dir.file(k.name), "--steps 3 --dropout 0");
    ASSERT_EQ(run.exit_code, 0) << k.name << ": " << run.output;
    const CommandResult sim = run_command("{ " + std::string(SHARDPLAN_BINARY) + " simulate --plan " + quote(plan) +
                                          " --json 2>/dev/null; }");
    ASSERT_EQ(sim.status, 0) << sim.out;
    const nlohmann::json predicted = nlohmann::json::parse(sim.out);
    const auto& stages = predicted["memory"]["stages"];
    const auto& measured = run.report["measured"]["peak_memory_bytes_per_rank"];
    const auto& pipe = run.report["measured"]["pipeline"];
    ASSERT_EQ(stages.size(), static_cast<size_t>(k.ranks));
    ASSERT_EQ(measured.size(), static_cast<size_t>(k.ranks));  // pp only: rank r is stage r
    for (int st = 0; st < k.ranks; ++st) {
      const double want = stages[st]["per_device_bytes"]["total"].get<double>();
      const double got = measured[st].get<double>();
      std::printf("%s stage %d: peak %.2f MiB, predicted %.2f MiB (%+.1f %%), held %d, B %.1f ms, W %.1f ms\n", k.name,
                  st, got / 1048576, want / 1048576, 100 * (got / want - 1),
                  pipe["max_in_flight_per_stage"][st].get<int>(),
                  1e3 * pipe["backward_input_seconds_per_stage"][st].get<double>(),
                  1e3 * pipe["backward_weight_seconds_per_stage"][st].get<double>());
      EXPECT_NEAR(got, want, 0.05 * want) << k.name << " stage " << st;
      EXPECT_EQ(pipe["max_in_flight_per_stage"][st], predicted["pipeline"]["max_in_flight"][st]) << k.name;
      EXPECT_GT(pipe["backward_input_seconds_per_stage"][st].get<double>(), 0.0) << k.name;
      if (std::string(k.schedule) == "1f1b")
        EXPECT_EQ(pipe["backward_weight_seconds_per_stage"][st].get<double>(), 0.0);
      else EXPECT_GT(pipe["backward_weight_seconds_per_stage"][st].get<double>(), 0.0) << k.name;
    }
  }
}

// What shardrun cannot run with a deferred W is refused before training, in one line naming the field.
TEST(Schedules, ZeroBubbleCombinationsShardrunDoesNotRunAreOneLineNamingTheField) {
  TempDir dir("shardrun_zero_bubble_refused");
  struct Case {
    const char* name;
    const char* model;
    nlohmann::json config;
    const char* field;
  };
  const Case cases[] = {
      {"zero2",
       "tiny-llama",
       {{"pipeline_parallel", 2}, {"data_parallel", 2}, {"zero_stage", 2}, {"pipeline_schedule", "zb1p"}},
       "field 'config.zero_stage'"},
      {"tied_v",
       "tiny-gpt",
       {{"pipeline_parallel", 2}, {"pipeline_schedule", "zbv"}, {"virtual_stages", 2}},
       "field 'config.schedule'"},
      {"dualpipev",
       "tiny-llama",
       {{"pipeline_parallel", 2}, {"pipeline_schedule", "dualpipev"}, {"virtual_stages", 2}, {"micro_batch_size", 1}},
       "field 'config.schedule'"}};
  for (const Case& k : cases) {
    const std::string plan = write_plan(dir, k.name, k.model, k.config);
    const int ranks = k.config.value("data_parallel", 1) * 2;
    const RunResult run = shardrun(ranks, plan, dir.file(k.name), "--steps 1");
    EXPECT_EQ(run.exit_code, 2) << k.name << ": " << run.output;
    EXPECT_NE(run.output.find(k.field), std::string::npos) << k.name << ": " << run.output;
  }
}

// A stage that throws halfway through its op list: shardrun aborts the job, so the other stages
// (blocked on a receive from it) end too, with an error, long before any harness timeout.
TEST(Schedules, AStageFailingMidScheduleEndsEveryRank) {
  TempDir dir("shardrun_stage_fails");
  for (int ranks : {2, 4}) {
    const std::string plan =
        write_plan(dir, "pp" + std::to_string(ranks), "tiny-llama",
                   {{"pipeline_parallel", ranks}, {"pipeline_schedule", "1f1b"}, {"micro_batch_size", 1}});
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = shardrun(ranks, plan, dir.file("out" + std::to_string(ranks)),
                                 "--steps 5 --comm-timeout 20 --inject-fault throw:1:2");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("injected fault: stage 1 failed"), std::string::npos) << r.output;
    EXPECT_LT(seconds, 120.0);  // bounded by the abort (or the 20 s receive timeout), not the harness's 600 s
  }
}

}  // namespace pipeline_test
}  // namespace shardplan::testing
