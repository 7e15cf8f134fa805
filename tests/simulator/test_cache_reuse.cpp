// A block's backward on a CPU finds what its forward saved still in the cache when the later
// blocks' activations and weights fit beside it (simulator/cache_reuse.hpp): a profile's warm
// backward prices that share of the calls, its cold backward the rest. No cache figure, or no
// warm curve (every GPU profile), leaves backward as it was.
#include <gtest/gtest.h>

#include "simulator/cache_reuse.hpp"
#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace cache_reuse_test {  // named, not anonymous: the files share a unity-build unit

TEST(CacheReuse, TheLastBlocksThatFitTheCacheRunTheirBackwardWarm) {
  EXPECT_DOUBLE_EQ(warm_backward_fraction(32e6, 4, 2e6, 2e6), 1.0);   // 16 MB of blocks in 32 MB
  EXPECT_DOUBLE_EQ(warm_backward_fraction(32e6, 4, 12e6, 4e6), 0.5);  // two of the four blocks
  EXPECT_LT(warm_backward_fraction(32e6, 4, 60e6, 4e6), 0.15);        // a block overflows the cache
  EXPECT_DOUBLE_EQ(warm_backward_fraction(0, 4, 2e6, 2e6), 0.0);      // no cache figure: cold
  // More micro-batch, more activations per block: never more warm.
  double last = 1.0;
  for (double act = 1e6; act < 1e9; act *= 2) {
    const double w = warm_backward_fraction(32e6, 4, act, 4e6);
    EXPECT_LE(w, last);
    last = w;
  }
}

OpCost flat(double forward, double backward, double warm) {
  return OpCost{EfficiencyCurve{{3.0, 9.0}, {forward, forward}}, EfficiencyCurve{{3.0, 9.0}, {backward, backward}},
                EfficiencyCurve{{3.0, 9.0}, {warm, warm}}};
}

ClusterSpec cpu_with_warm_ops(double cache_bytes, bool warm_curves) {
  ClusterSpec c = testing::cluster("local-cpu-2core", 1);
  c.devices_per_node = 1;
  DeviceProfile& dev = c.hardware.device;
  dev.last_level_cache_bytes = cache_bytes;
  auto& fp32 = dev.op_costs[static_cast<std::size_t>(Precision::fp32)];
  for (OpKind k : {OpKind::rms_norm, OpKind::swiglu, OpKind::rotary, OpKind::causal_softmax}) {
    fp32[static_cast<std::size_t>(k)] = flat(2e-9, 6e-9, 3e-9);
    if (!warm_curves) fp32[static_cast<std::size_t>(k)].backward_warm_s_per_element = {};
  }
  return c;
}

double backward_compute_s(const ClusterSpec& c, int micro_batch) {
  ParallelConfig cfg;
  cfg.seq_len = 128;
  cfg.micro_batch_size = micro_batch;
  cfg.global_batch_size = 8;
  cfg.precision = Precision::fp32;
  cfg.attention = AttentionKind::eager;
  cfg.dp = 1;
  return testing::run(load_model("tiny-llama"), c, cfg).time.backward_compute_s;
}

TEST(CacheReuse, ASmallMicroBatchsBackwardIsPricedWarmAndALargeOnesCold) {
  const ClusterSpec cold = cpu_with_warm_ops(0, true), no_warm = cpu_with_warm_ops(32e6, false);
  const ClusterSpec cached = cpu_with_warm_ops(32e6, true);
  for (int mbs : {1, 8}) {
    // Without a cache figure or without warm curves: every backward cold, the same either way.
    EXPECT_DOUBLE_EQ(backward_compute_s(cold, mbs), backward_compute_s(no_warm, mbs)) << mbs;
    EXPECT_LT(backward_compute_s(cached, mbs), backward_compute_s(cold, mbs)) << mbs;
  }
  // Warm saves a larger share of a small micro-batch's backward (per step: 8 of 1 against 1 of 8).
  const double saved_small = 1 - backward_compute_s(cached, 1) / backward_compute_s(cold, 1);
  const double saved_large = 1 - backward_compute_s(cached, 8) / backward_compute_s(cold, 8);
  EXPECT_GT(saved_small, saved_large);
}

TEST(CacheReuse, TheWarmCurveAndTheCacheParseAndRoundTrip) {
  ClusterSpec c = cpu_with_warm_ops(32e6, true);
  const nlohmann::json j = to_json(c.hardware);
  EXPECT_EQ(j["device"]["last_level_cache_bytes"], 32e6);
  EXPECT_TRUE(j["device"]["op_costs"]["rms_norm"]["fp32"].contains("backward_warm_seconds_per_element_by_elements"));
  const HardwareProfile back = hardware_from_json(j, "cpu.json");
  EXPECT_EQ(back.device.last_level_cache_bytes, 32e6);
  const OpCost* rms = back.device.op_cost(Precision::fp32, OpKind::rms_norm);
  ASSERT_NE(rms, nullptr);
  EXPECT_NEAR(rms->backward_s(1e5, 1.0), 3e-9 * 1e5, 1e-12);
  EXPECT_NEAR(rms->backward_s(1e5, 0.5), 4.5e-9 * 1e5, 1e-12);
  nlohmann::json bad = j;
  bad["device"]["last_level_cache_bytes"] = "big";
  try {
    (void)hardware_from_json(bad, "cpu.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("last_level_cache_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace cache_reuse_test
}  // namespace shardplan::simulator
