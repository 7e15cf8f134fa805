// `shardrun health` under mpirun: every rank's device check and a short all-reduce; a failing
// rank is named and the exit is non-zero; a hung rank ends the check through the comm timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "executor/harness.hpp"

namespace shardplan::testing {
namespace run_health_test {  // named, not anonymous: the files share a unity-build unit

CommandResult health(const std::string& args) {
  return run_command(std::string("timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ") +
                     SHARDRUN_BINARY + " health " + args);
}

TEST(Health, EveryRankChecksItsDeviceAndTheAllReduce) {
  TempDir dir("resilience_health");
  const CommandResult r = health("--out " + quote(dir.file("health.json")));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto report = nlohmann::json::parse(std::ifstream(dir.file("health.json")));
  EXPECT_TRUE(report["ok"].get<bool>());
  ASSERT_EQ(report["ranks"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto& rank = report["ranks"][i];
    EXPECT_EQ(rank["rank"], i);
    EXPECT_TRUE(rank["device_check"]["ok"].get<bool>());
    EXPECT_TRUE(rank["allreduce_check"]["ok"].get<bool>());
    EXPECT_GT(rank["allreduce_check"]["bytes"].get<double>(), 0.0);
  }
  EXPECT_NE(r.out.find("health: rank 1 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("health: ok (2 of 2 rank(s) healthy"), std::string::npos) << r.out;
}

TEST(Health, AFailingRankIsNamedAndTheExitIsNonZero) {
  const CommandResult r = health("--quiet --inject-fault fail:1");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("health: rank 1 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device FAILED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("health: rank 0 ("), std::string::npos) << "--quiet prints failing ranks only\n" << r.out;
  EXPECT_NE(r.out.find("1 of 2 rank(s) healthy"), std::string::npos) << r.out;
}

TEST(Health, AHungRankEndsTheCheckThroughTheCommTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const CommandResult r = health("--quiet --comm-timeout 3 --inject-fault hang:1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("timed out"), std::string::npos) << r.out;
  EXPECT_LT(seconds, 120.0);  // bounded by the 3 s timeout plus start-up, not by the harness's 300 s
}

TEST(Health, BadOptionsExitTwo) {
  const CommandResult r = health("--inject-fault sometimes:1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--inject-fault: expected hang:RANK or fail:RANK"), std::string::npos) << r.out;
}

}  // namespace run_health_test
}  // namespace shardplan::testing
