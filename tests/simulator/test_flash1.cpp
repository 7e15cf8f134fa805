// Attention kind flash1 (FlashAttention v1 and its Triton port): the fused kernel's memory and
// FLOPs, its time the FlashAttention-2 rate divided by the profile's
// device.flash_attention_v1_slowdown (FlashAttention-2 paper §4.1 on the A100), the factor's
// parsing and round trip, and the kind's spelling in the CLI's planner tags.
#include <gtest/gtest.h>

#include <string>

#include "simulator/errors.hpp"
#include "simulator/step_model.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace flash1_test {  // named, not anonymous: the files share a unity-build unit

using testing::BlockEnv;
using testing::cluster;
using testing::config;
using testing::run;

TEST(Flash1, StoresWhatFlashStoresAndExecutesTheSameFlops) {
  const BlockEnv be("llama2-7b", "p4de.24xlarge");
  for (int s : {1024, 4096})
    for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
      EXPECT_DOUBLE_EQ(be.bytes(AttentionKind::flash1, 1, s, 2, r), be.bytes(AttentionKind::flash, 1, s, 2, r));
      EXPECT_LT(be.bytes(AttentionKind::flash1, 1, s, 2), be.bytes(AttentionKind::eager, 1, s, 2));
    }
  const AttentionFlops f1 = attention_flops(be.env(AttentionKind::flash1, 1, 4096, 1));
  const AttentionFlops f2 = attention_flops(be.env(AttentionKind::flash, 1, 4096, 1));
  EXPECT_DOUBLE_EQ(f1.executed_forward, f2.executed_forward);
  EXPECT_DOUBLE_EQ(f1.executed_backward, f2.executed_backward);
}

TEST(Flash1, TimeIsTheFlashRateDividedByTheProfilesFactors) {
  // A100: compute-bound at s = 4096, head dim 128, causal; the built-in factors are given.
  const BlockEnv a100("llama2-7b", "p4de.24xlarge");
  const auto& dev = a100.c.hardware.device;
  ASSERT_TRUE(dev.flash_attention_v1_slowdown.given());
  ASSERT_GT(dev.flash_attention_v1_slowdown.backward, dev.flash_attention_v1_slowdown.forward);
  const AttentionTime v2 = flash_attention_time(a100.env(AttentionKind::flash, 1, 4096, 1));
  const AttentionTime v1 = flash_attention_time(a100.env(AttentionKind::flash1, 1, 4096, 1));
  const double launch = dev.kernel_launch_s;
  EXPECT_NEAR(v1.forward_s - launch, (v2.forward_s - launch) * dev.flash_attention_v1_slowdown.forward, 1e-12);
  EXPECT_NEAR(v1.backward_s - launch, (v2.backward_s - launch) * dev.flash_attention_v1_slowdown.backward, 1e-12);
  // A profile without the factors (H100: no published comparison) times flash1 as flash.
  const BlockEnv h100("llama2-7b", "p5.48xlarge");
  ASSERT_FALSE(h100.c.hardware.device.flash_attention_v1_slowdown.given());
  const AttentionTime h2 = flash_attention_time(h100.env(AttentionKind::flash, 1, 4096, 1));
  const AttentionTime h1 = flash_attention_time(h100.env(AttentionKind::flash1, 1, 4096, 1));
  EXPECT_DOUBLE_EQ(h1.forward_s, h2.forward_s);
  EXPECT_DOUBLE_EQ(h1.backward_s, h2.backward_s);
}

TEST(Flash1, AWholeStepIsSlowerOnlyThroughTheAttentionCore) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 8192);
  cfg.recompute = Recompute::full;
  const Prediction v2 = run(m, c, cfg);
  cfg.attention = AttentionKind::flash1;
  const Prediction v1 = run(m, c, cfg);
  ASSERT_TRUE(v1.feasible && v2.feasible);
  EXPECT_GT(v1.time.step_s, v2.time.step_s);
  EXPECT_DOUBLE_EQ(v1.worst.activations, v2.worst.activations);
  EXPECT_DOUBLE_EQ(v1.model_flops_per_step, v2.model_flops_per_step);
  EXPECT_DOUBLE_EQ(v1.hardware_flops_per_step, v2.hardware_flops_per_step);
  // The longer the sequence, the larger the attention core's share and the gap.
  const auto gap = [&](int s) {
    ParallelConfig x = config(c, 1, 1, 3, 1, 8, s);
    x.recompute = Recompute::full;
    const double t2 = run(m, c, x).time.step_s;
    x.attention = AttentionKind::flash1;
    return run(m, c, x).time.step_s / t2;
  };
  EXPECT_GT(gap(16384), gap(2048));
}

TEST(Flash1, FactorsParseRoundTripAndRefuseSpeedups) {
  nlohmann::json j = to_json(load_hardware("p4d.24xlarge"));
  ASSERT_TRUE(j["device"].contains("flash_attention_v1_slowdown"));
  const HardwareProfile back = hardware_from_json(j, "embedded");
  EXPECT_DOUBLE_EQ(back.device.flash_attention_v1_slowdown.forward,
                   load_hardware("p4d.24xlarge").device.flash_attention_v1_slowdown.forward);
  EXPECT_FALSE(to_json(load_hardware("p5.48xlarge"))["device"].contains("flash_attention_v1_slowdown"));
  for (const auto& [bad, field] :
       {std::pair<nlohmann::json, std::string>{{{"forward", 0.5}, {"backward", 2.0}}, "forward"},
        {{{"forward", 1.4}, {"backward", 0.9}}, "backward"},
        {{{"forward", 1.4}}, "backward"},
        {nlohmann::json::array(), "flash_attention_v1_slowdown"}}) {
    nlohmann::json p = j;
    p["device"]["flash_attention_v1_slowdown"] = bad;
    try {
      (void)hardware_from_json(p, "x.json");
      FAIL() << "expected an InputError for " << bad.dump();
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("x.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find("flash_attention_v1_slowdown"), std::string::npos) << msg;
      EXPECT_NE(msg.find(field), std::string::npos) << msg;
    }
  }
}

TEST(Flash1, ContextParallelStillAsksForFlash) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 4, 8192);
  cfg.cp = 2;
  cfg.dp = 4;
  validate_config(m, c, cfg);  // flash: fine
  cfg.attention = AttentionKind::flash1;
  EXPECT_THROW(validate_config(m, c, cfg), InputError);
}

}  // namespace flash1_test
}  // namespace shardplan::simulator
