// The progress watchdog's limit (executor/run/watchdog.hpp): max(factor x the plan's predicted step
// time, the floor), disabled when both are <= 0. Its firing is tested end to end, on a real stall
// under shardrun-launch (tests/resilience/test_run_faults.cpp).
#include <gtest/gtest.h>

#include "executor/run/watchdog.hpp"

namespace shardplan::executor {
namespace watchdog_test {  // named, not anonymous: the files share a unity-build unit

TEST(Watchdog, LimitIsTheLargerOfTheScaledPredictionAndTheFloor) {
  EXPECT_DOUBLE_EQ(stall_limit_s(20, 2.0, 600), 600.0);   // fast steps: the floor
  EXPECT_DOUBLE_EQ(stall_limit_s(20, 45.0, 600), 900.0);  // slow steps: 20 of them
  EXPECT_DOUBLE_EQ(stall_limit_s(0, 45.0, 4), 4.0);       // the floor alone
  EXPECT_DOUBLE_EQ(stall_limit_s(3, 10.0, 0), 30.0);      // the prediction alone
  EXPECT_DOUBLE_EQ(stall_limit_s(0, 10.0, 0), 0.0);       // disabled
  EXPECT_DOUBLE_EQ(stall_limit_s(-1, 10.0, -5), 0.0);
  EXPECT_DOUBLE_EQ(stall_limit_s(5, -1.0, 2), 2.0);  // no prediction: the floor
}

TEST(Watchdog, ADisabledWatchdogStartsNoThreadAndEndsCleanly) {
  Watchdog w(0.0, 0);
  w.phase("anything");
  w.step_done();
  SUCCEED();
}

TEST(Watchdog, AWatchdogThatIsNeverReachedEndsWithItsOwner) {
  Watchdog w(3600.0, 0);  // far beyond this test; the destructor stops its thread at once
  w.phase("a step");
  w.step_done();
  SUCCEED();
}

}  // namespace watchdog_test
}  // namespace shardplan::executor
