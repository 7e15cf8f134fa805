// Training-log readers (interop/training_log*.cpp): each format's fixture in tests/data/logs
// (written for these tests in the framework's own line format) gives the figures on its lines;
// other lines are skipped; a malformed line of the format is named by its line number.
#include <gtest/gtest.h>

#include <sstream>

#include "interop/training_log.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {
namespace training_log_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

std::string fixture(const std::string& name) { return std::string(SHARDPLAN_TEST_DATA_DIR) + "/logs/" + name; }

TrainingLog parse_text(const std::string& text, LogFormat f) {
  std::istringstream in(text);
  return parse_training_log(in, f, "test.log");
}

std::string error_of(const std::string& text, LogFormat f) {
  try {
    parse_text(text, f);
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

TEST(TrainingLog, FormatNamesRoundTrip) {
  for (const auto& name : log_format_names()) {
    const auto f = log_format_from_string(name);
    ASSERT_TRUE(f) << name;
    EXPECT_EQ(to_string(*f), name);
  }
  EXPECT_FALSE(log_format_from_string("nemo"));
}

TEST(TrainingLog, MegatronIterationLinesAndTheLargestMemoryReport) {
  const TrainingLog log = load_training_log(fixture("megatron.log"), LogFormat::megatron);
  ASSERT_EQ(log.steps.size(), 6u);  // iterations 1, 10, ..., 50; the timers block is skipped
  EXPECT_EQ(log.steps[0].iteration, 1);
  EXPECT_DOUBLE_EQ(*log.steps[0].step_s, 9.5124);
  EXPECT_EQ(log.steps[5].iteration, 50);
  EXPECT_DOUBLE_EQ(*log.steps[5].step_s, 4.4085);
  EXPECT_DOUBLE_EQ(*log.steps[1].flops_per_s_per_device, 104.2e12);
  EXPECT_DOUBLE_EQ(*log.steps[1].loss, 10.4321);
  // Two ranks report; the larger "max allocated" is the peak.
  EXPECT_DOUBLE_EQ(*log.peak_bytes, 55122.40 * kMiB);
  // Warm-up (iteration 1) left out: median of 4410.7, 4405.6, 4411.3, 4402.8, 4408.5 ms.
  const MeasuredFigure m = measured_figure(log);
  EXPECT_EQ(m.key, "step_seconds");
  EXPECT_DOUBLE_EQ(m.value, 4.4085);
  EXPECT_EQ(m.steps_used, 5);
  // Without skipping, the slow first iteration is in: median of six = mean of the middle two.
  EXPECT_DOUBLE_EQ(measured_figure(log, 0).value, 0.5 * (4.4085 + 4.4107));
}

TEST(TrainingLog, TorchtitanStripsColoursAndSeparatorsAndSkipsValidation) {
  const TrainingLog log = load_training_log(fixture("torchtitan.log"), LogFormat::torchtitan);
  ASSERT_EQ(log.steps.size(), 4u);  // steps 1, 10, 20, 30; not "validate step: 10"
  EXPECT_EQ(log.steps[1].iteration, 10);
  EXPECT_DOUBLE_EQ(*log.steps[1].tokens_per_s_per_device, 3341);
  EXPECT_DOUBLE_EQ(*log.steps[1].flops_per_s_per_device, 154.66e12);
  EXPECT_DOUBLE_EQ(*log.steps[1].peak_bytes, 49.66 * kGiB);
  EXPECT_DOUBLE_EQ(*log.steps[2].loss, 7.91045);
  const MeasuredFigure m = measured_figure(log);
  EXPECT_EQ(m.key, "tokens_per_second_per_device");
  EXPECT_DOUBLE_EQ(m.value, 3350);  // median of 3,341 3,357 3,350
}

TEST(TrainingLog, DeepSpeedThroughputLinesGiveGlobalSamplesPerSecond) {
  const TrainingLog log = load_training_log(fixture("deepspeed.log"), LogFormat::deepspeed);
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_EQ(log.steps[0].iteration, 10);
  EXPECT_DOUBLE_EQ(*log.steps[0].samples_per_s, 14.0123456);
  EXPECT_DOUBLE_EQ(*log.peak_bytes, 35.10 * kGiB);
  const MeasuredFigure m = measured_figure(log);
  EXPECT_EQ(m.key, "samples_per_second");
  EXPECT_DOUBLE_EQ(m.value, 14.0411012);  // median of steps 20, 30, 40
}

TEST(TrainingLog, HfTrainerHasOnlyItsSummary) {
  const TrainingLog log = load_training_log(fixture("hf-trainer.log"), LogFormat::hf_trainer);
  EXPECT_TRUE(log.steps.empty());
  ASSERT_TRUE(log.summary);
  EXPECT_DOUBLE_EQ(*log.summary->samples_per_s, 15.513);
  EXPECT_DOUBLE_EQ(*log.summary->steps_per_s, 0.485);
  EXPECT_DOUBLE_EQ(*log.summary->runtime_s, 412.5521);
  EXPECT_FALSE(log.peak_bytes);
  const MeasuredFigure m = measured_figure(log);
  EXPECT_EQ(m.key, "samples_per_second");
  EXPECT_DOUBLE_EQ(m.value, 15.513);
  EXPECT_EQ(m.steps_used, 0);
}

TEST(TrainingLog, HfTrainerReadsQuotedNumbersOfNewerVersions) {
  const TrainingLog log =
      parse_text("{'train_runtime': '412.6', 'train_samples_per_second': '15.51', 'train_steps_per_second': '0.485'}\n",
                 LogFormat::hf_trainer);
  EXPECT_DOUBLE_EQ(*log.summary->samples_per_s, 15.51);
}

TEST(TrainingLog, OptimumHabanaAddsHpuMemory) {
  const TrainingLog log = load_training_log(fixture("optimum-habana.log"), LogFormat::optimum_habana);
  ASSERT_TRUE(log.summary);
  EXPECT_DOUBLE_EQ(*log.summary->samples_per_s, 6.811);
  EXPECT_DOUBLE_EQ(*log.peak_bytes, 94.25 * kGiB);
  // The same log read as a plain HF Trainer log has no memory figure.
  EXPECT_FALSE(load_training_log(fixture("optimum-habana.log"), LogFormat::hf_trainer).peak_bytes);
}

TEST(TrainingLog, ShardrunMetricsJsonl) {
  const TrainingLog log = load_training_log(fixture("shardrun-metrics.jsonl"), LogFormat::shardrun);
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_EQ(log.steps[0].iteration, 1);
  EXPECT_DOUBLE_EQ(*log.steps[0].step_s, 0.397268721);
  EXPECT_DOUBLE_EQ(*log.peak_bytes, 101670912);
}

TEST(TrainingLog, MalformedLinesAreNamedByLineNumber) {
  const std::string megatron =
      "starting\n"
      " [2026] iteration        1/ 2 | elapsed time per iteration (ms): 100.0 |\n"
      " [2026] iteration        2/ 2 | elapsed time per iteration (ms): fast |\n";
  const std::string e = error_of(megatron, LogFormat::megatron);
  EXPECT_NE(e.find("test.log:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("elapsed time per iteration (ms):"), std::string::npos) << e;
  EXPECT_NE(error_of("x\ny\nstep: 3  loss: 1.0  tps: -5\n", LogFormat::torchtitan).find("test.log:3:"),
            std::string::npos);
  EXPECT_NE(error_of("epoch=0/micro_step=1/global_step=1, RunningAvgSamplesPerSec=1, CurrSamplesPerSec=x\n",
                     LogFormat::deepspeed)
                .find("test.log:1:"),
            std::string::npos);
  EXPECT_NE(error_of("{\"step\": 1, \"step_seconds\": 0.5}\n{\"step\": 2}\n", LogFormat::shardrun).find("test.log:2:"),
            std::string::npos);
  EXPECT_NE(error_of("{\"step\": 1, \"step_seconds\": 0.5\n", LogFormat::shardrun).find("test.log:1:"),
            std::string::npos);
  EXPECT_NE(error_of("ok\n{'train_samples_per_second': 'n/a'}\n", LogFormat::hf_trainer).find("test.log:2:"),
            std::string::npos);
}

TEST(TrainingLog, ALogWithoutAnyLineOfTheFormatIsRefused) {
  const std::string e = error_of("hello\nworld\n", LogFormat::torchtitan);
  EXPECT_NE(e.find("no torchtitan training-log line"), std::string::npos) << e;
  // The Megatron fixture read as torchtitan has none either.
  EXPECT_THROW(load_training_log(fixture("megatron.log"), LogFormat::torchtitan), sim::InputError);
  EXPECT_THROW(load_training_log(fixture("no-such.log"), LogFormat::megatron), sim::InputError);
}

TEST(TrainingLog, SkippingEveryStepLeavesNoFigure) {
  const TrainingLog log = load_training_log(fixture("deepspeed.log"), LogFormat::deepspeed);
  EXPECT_THROW(measured_figure(log, 4), sim::InputError);
  EXPECT_THROW(measured_figure(log, -1), sim::InputError);
  EXPECT_EQ(measured_figure(log, 3).steps_used, 1);
}

}  // namespace training_log_test
}  // namespace shardplan::interop
