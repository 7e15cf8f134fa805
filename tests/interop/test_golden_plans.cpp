// The golden plans themselves are valid plans (validate_config passes in plan_of) and are what
// their comments say.
#include <gtest/gtest.h>

#include "interop/golden.hpp"

namespace golden_plans_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::golden;  // NOLINT

TEST(GoldenPlans, AllFourBuildAndCoverTheLayoutsTheFormatsMustExpress) {
  const auto plans = golden_plans();
  ASSERT_EQ(plans.size(), 4u);
  EXPECT_GT(golden_plan("dense-3d").config.pp, 1);
  EXPECT_GT(golden_plan("dense-3d").config.tp, 1);
  EXPECT_EQ(golden_plan("zero3-lora").config.zero_stage, 3);
  EXPECT_TRUE(golden_plan("zero3-lora").config.lora.enabled());
  EXPECT_GT(golden_plan("moe-cp").config.ep, 1);
  EXPECT_GT(golden_plan("moe-cp").config.cp, 1);
  EXPECT_EQ(golden_plan("neuron-3d").cluster.devices(), 1024);
}

}  // namespace golden_plans_test
