// Flash attention on a device with no fused kernel (device.fused_attention false: shardrun on a
// CPU runs the algorithm as separate ops): priced by the profile's measured attention GEMMs and
// softmax, forward as the eager core's, backward the eager core's plus the recomputed scores and
// probabilities; a causal ring runs (1 + (cp - 1) / 2) / cp of the scores. The flag parses, round
// trips and is refused when it is not a boolean; a fused device is untouched by it.
#include <gtest/gtest.h>

#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace unfused_flash_test {  // named, not anonymous: the files share a unity-build unit

using testing::BlockEnv;

// Flat measured costs (seconds per FLOP / per element, the same at every size), so that the
// sums below are exact.
OpCost flat(double forward, double backward) {
  return OpCost{EfficiencyCurve{{3.0, 9.0}, {forward, forward}}, EfficiencyCurve{{3.0, 9.0}, {backward, backward}}};
}

BlockEnv cpu_block(bool fused) {
  BlockEnv be("tiny-llama", "local-cpu-2core");
  DeviceProfile& dev = be.c.hardware.device;
  auto& fp32 = dev.op_costs[static_cast<std::size_t>(Precision::fp32)];
  fp32[static_cast<std::size_t>(OpKind::attention_gemms)] = flat(2e-11, 5e-11);
  fp32[static_cast<std::size_t>(OpKind::causal_softmax)] = flat(4e-9, 6e-9);
  dev.fused_attention = fused;
  return be;
}

ParallelConfig layout(AttentionKind kind, int cp, CpKind cp_kind) {
  ParallelConfig cfg;
  cfg.seq_len = 128;
  cfg.micro_batch_size = 4;
  cfg.precision = Precision::fp32;
  cfg.attention = kind;
  cfg.cp = cp;
  cfg.cp_kind = cp_kind;
  return cfg;
}

TEST(UnfusedFlash, ForwardIsTheEagerCoresAndBackwardAddsTheRecompute) {
  const BlockEnv be = cpu_block(false);
  ASSERT_EQ(be.m.attention_dropout, 0.0);  // eager would add a dropout pass
  const PartCost eager = block_cost(be.env(layout(AttentionKind::eager, 1, CpKind::ring)));
  const PartCost flash = block_cost(be.env(layout(AttentionKind::flash, 1, CpKind::ring)));
  EXPECT_NEAR(flash.forward_s, eager.forward_s, 1e-15);
  // The recomputed scores GEMM (half the forward GEMMs) and softmax: between half the forward
  // attention core and all of it.
  const AttentionTime t = flash_attention_time(be.env(layout(AttentionKind::flash, 1, CpKind::ring)));
  EXPECT_GT(flash.backward_s - eager.backward_s, t.forward_s / 2);
  EXPECT_LT(flash.backward_s - eager.backward_s, t.forward_s);
}

TEST(UnfusedFlash, ACausalRingRunsThreeQuartersOfItsScoresOnTwoRanks) {
  const BlockEnv be = cpu_block(false);
  // Ulysses runs the whole sequence's scores for a/cp heads: as many as the ring's before skipping.
  const AttentionTime ring = flash_attention_time(be.env(layout(AttentionKind::flash, 2, CpKind::ring)));
  const AttentionTime whole = flash_attention_time(be.env(layout(AttentionKind::flash, 2, CpKind::all_to_all)));
  EXPECT_NEAR(ring.forward_s / whole.forward_s, 0.75, 1e-12);
  EXPECT_NEAR(ring.backward_s / whole.backward_s, 0.75, 1e-12);
}

TEST(UnfusedFlash, AFusedDeviceAndAProfileWithoutTheOpsKeepTheKernelModel) {
  const ParallelConfig cfg = layout(AttentionKind::flash, 1, CpKind::ring);
  const BlockEnv fused = cpu_block(true);
  const BlockEnv no_ops("tiny-llama", "local-cpu-2core");  // no op costs measured
  BlockEnv no_ops_unfused("tiny-llama", "local-cpu-2core");
  no_ops_unfused.c.hardware.device.fused_attention = false;
  const AttentionTime a = flash_attention_time(fused.env(cfg));
  const AttentionTime b = flash_attention_time(no_ops.env(cfg));
  const AttentionTime c = flash_attention_time(no_ops_unfused.env(cfg));
  EXPECT_DOUBLE_EQ(a.forward_s, b.forward_s);
  EXPECT_DOUBLE_EQ(a.backward_s, b.backward_s);
  EXPECT_DOUBLE_EQ(c.forward_s, b.forward_s);
  EXPECT_DOUBLE_EQ(c.backward_s, b.backward_s);
  // And the ops' price differs from the kernel model's: the flag is what switches it.
  EXPECT_NE(flash_attention_time(cpu_block(false).env(cfg)).forward_s, a.forward_s);
}

TEST(UnfusedFlash, TheFlagParsesRoundTripsAndRefusesANonBoolean) {
  nlohmann::json j = to_json(load_hardware("local-cpu-2core"));
  EXPECT_FALSE(j["device"].contains("fused_attention"));  // fused: the default, not written
  EXPECT_TRUE(hardware_from_json(j, "cpu.json").device.fused_attention);
  j["device"]["fused_attention"] = false;
  const HardwareProfile h = hardware_from_json(j, "cpu.json");
  EXPECT_FALSE(h.device.fused_attention);
  EXPECT_EQ(to_json(h)["device"]["fused_attention"], false);
  j["device"]["fused_attention"] = "no";
  try {
    hardware_from_json(j, "cpu.json");
    FAIL() << "a string was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fused_attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu.json"), std::string::npos) << e.what();
  }
}

}  // namespace unfused_flash_test
}  // namespace shardplan::simulator
