// A run's history across restarts (executor/metrics/run_history.hpp): MetricsLog appends a resumed
// run as the next attempt and never rewrites earlier lines, a line torn by a kill is skipped and
// ended before the next attempt writes, and the summary counts the steps run again per restart.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "executor/metrics/run_history.hpp"
#include "executor/metrics/run_report.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor {
namespace run_history_test {  // named, not anonymous: the files share a unity-build unit

StepRecord step(int64_t n, double loss) {
  StepRecord r;
  r.step = n;
  r.loss = loss;
  r.step_s = 0.5;
  return r;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(RunHistory, ResumedRunsAppendAsNewAttemptsAndAFreshRunStartsOver) {
  testing::TempDir dir("run_history");
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsLog log;
    EXPECT_EQ(log.open(path, true), 1);  // --resume auto, nothing yet: the first attempt
    for (int64_t s = 1; s <= 4; ++s) log.write(step(s, 10.0 - s));
  }
  const std::string first = text_of(path);
  {
    MetricsLog log;
    EXPECT_EQ(log.open(path, true), 2);
    for (int64_t s = 4; s <= 6; ++s) log.write(step(s, 10.0 - s));
  }
  EXPECT_EQ(text_of(path).substr(0, first.size()), first) << "an earlier attempt's lines were rewritten";
  const MetricsLines m = read_metrics(path);
  ASSERT_EQ(m.lines.size(), 7u);
  EXPECT_EQ(m.lines[3]["attempt"], 1);
  EXPECT_EQ(m.lines[4]["attempt"], 2);
  EXPECT_EQ(next_attempt(m), 3);

  const nlohmann::json h = summarize_attempts(m);
  EXPECT_EQ(h["count"], 2);
  EXPECT_EQ(h["steps_run"], 7);
  EXPECT_EQ(h["steps_lost"], 1);  // step 4 ran in both
  EXPECT_EQ(h["per_attempt"][1]["first_step"], 4);
  EXPECT_EQ(h["per_attempt"][1]["last_step"], 6);
  EXPECT_GE(h["per_attempt"][1]["restart_gap_seconds"].get<double>(), -0.5);  // start = write time - step_s
  {
    MetricsLog log;  // --resume none: a new run, the old history goes
    EXPECT_EQ(log.open(path, false), 1);
    log.write(step(1, 9.0));
  }
  EXPECT_EQ(read_metrics(path).lines.size(), 1u);
}

TEST(RunHistory, ALineTornByAKillIsSkippedAndEndedBeforeTheNextAttempt) {
  testing::TempDir dir("run_history_torn");
  const std::string path = dir.file("metrics.jsonl");
  {
    std::ofstream out(path);
    out << R"({"step":1,"loss":2.5,"attempt":1})"
        << "\n"
        << R"({"step":2,"lo)";  // killed mid-write
  }
  MetricsLines m = read_metrics(path);
  EXPECT_EQ(m.lines.size(), 1u);
  EXPECT_EQ(m.unreadable, 1);
  {
    MetricsLog log;
    EXPECT_EQ(log.open(path, true), 2);
    log.write(step(2, 2.25));
  }
  m = read_metrics(path);
  ASSERT_EQ(m.lines.size(), 2u);  // the new line was not glued onto the torn one
  EXPECT_EQ(m.lines[1]["step"], 2);
  EXPECT_EQ(m.lines[1]["attempt"], 2);
  EXPECT_EQ(summarize_attempts(m)["unreadable_lines"], 1);
}

TEST(RunHistory, LinesWithoutAnAttemptCountAsTheFirst) {
  testing::TempDir dir("run_history_old");
  const std::string path = dir.file("metrics.jsonl");
  {
    std::ofstream(path) << R"({"step":1,"loss":2.5})"
                        << "\n"
                        << R"({"step":2,"loss":2.4})"
                        << "\n";
  }
  const MetricsLines m = read_metrics(path);
  EXPECT_EQ(next_attempt(m), 2);
  const nlohmann::json h = summarize_attempts(m);
  EXPECT_EQ(h["count"], 1);
  EXPECT_EQ(h["steps_lost"], 0);
  EXPECT_FALSE(h["per_attempt"][0].contains("steps_lost"));  // nothing before the first
  EXPECT_EQ(summarize_attempts(read_metrics(dir.file("missing.jsonl")))["count"], 0);
}

}  // namespace run_history_test
}  // namespace shardplan::executor
