// Full recompute of the first k blocks of each model chunk (recompute_num_layers; Megatron-LM
// --recompute-method block): stored activations, recompute time and hardware FLOPs move linearly
// from no recompute (k = 0 blocks) to full recompute (k = all), per chunk; the bounds and the
// config check; the JSON round trip (the Megatron export: tests/planner/test_launch_export.cpp).
#include <gtest/gtest.h>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace recompute_layers_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

struct Three {
  Prediction none, block, full;
};

// llama2-7b (32 blocks) on one p4d node, ZeRO-1 over 8 ranks: k of the 32 blocks recomputed.
Three predictions(int k, int pp = 1) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, pp, 1, 1, 8 / pp * 4, 4096);
  Three t;
  cfg.recompute = Recompute::none;
  t.none = run(m, c, cfg);
  cfg.recompute = Recompute::full;
  t.full = run(m, c, cfg);
  cfg.recompute_num_layers = k;
  t.block = run(m, c, cfg);
  return t;
}

TEST(RecomputeLayers, ActivationsAndRecomputeTimeAreLinearInTheRecomputedBlocks) {
  for (int k : {1, 8, 16, 31}) {
    const Three t = predictions(k);
    const double f = k / 32.0;
    const double acts = t.none.worst.activations + f * (t.full.worst.activations - t.none.worst.activations);
    EXPECT_NEAR(t.block.worst.activations, acts, 1e-9 * acts) << k;
    EXPECT_NEAR(t.block.time.recompute_s, f * t.full.time.recompute_s, 1e-9 * t.full.time.recompute_s) << k;
    const double hw =
        t.none.hardware_flops_per_step + f * (t.full.hardware_flops_per_step - t.none.hardware_flops_per_step);
    EXPECT_NEAR(t.block.hardware_flops_per_step, hw, 1e-9 * hw) << k;
    EXPECT_DOUBLE_EQ(t.block.model_flops_per_step, t.full.model_flops_per_step);
    EXPECT_GT(t.block.time.step_s, t.none.time.step_s) << k;
    EXPECT_LT(t.block.time.step_s, t.full.time.step_s) << k;
  }
}

TEST(RecomputeLayers, AllBlocksIsFullRecompute) {
  const Three t = predictions(32);
  EXPECT_DOUBLE_EQ(t.block.time.step_s, t.full.time.step_s);
  EXPECT_DOUBLE_EQ(t.block.worst.total(), t.full.worst.total());
}

// With 4 stages of 8 blocks, k counts per stage (chunk): k = 4 recomputes half of every stage.
TEST(RecomputeLayers, CountsPerPipelineStage) {
  const Three t = predictions(4, 4);
  for (size_t s = 0; s < t.block.stages.size(); ++s) {
    EXPECT_GT(t.block.stages[s].memory.activations, t.full.stages[s].memory.activations) << s;
    EXPECT_LT(t.block.stages[s].memory.activations, t.none.stages[s].memory.activations) << s;
  }
  const double half =
      t.none.hardware_flops_per_step + 0.5 * (t.full.hardware_flops_per_step - t.none.hardware_flops_per_step);
  EXPECT_NEAR(t.block.hardware_flops_per_step, half, 1e-9 * half);
}

TEST(RecomputeLayers, BadValuesNameTheOption) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 8, 4096);
  auto message = [&](Recompute r, int k) {
    ParallelConfig x = cfg;
    x.recompute = r;
    x.recompute_num_layers = k;
    try {
      validate_config(m, c, x);
    } catch (const InputError& e) { return std::string(e.what()); }
    return std::string();
  };
  EXPECT_NE(message(Recompute::selective, 4).find("--recompute-num-layers: needs --recompute full"), std::string::npos);
  EXPECT_NE(message(Recompute::none, 4).find("--recompute-num-layers"), std::string::npos);
  EXPECT_NE(message(Recompute::full, -1).find("--recompute-num-layers: expected 0"), std::string::npos);
  EXPECT_NE(message(Recompute::full, 33).find("32 layers, got 33"), std::string::npos);
  EXPECT_EQ(message(Recompute::full, 32), "");
}

TEST(RecomputeLayers, RoundTripsThroughPlanJson) {
  ParallelConfig cfg;
  cfg.recompute = Recompute::full;
  cfg.recompute_num_layers = 6;
  const nlohmann::json j = to_json(cfg);
  EXPECT_EQ(j.at("recompute_num_layers"), 6);
  EXPECT_EQ(config_from_json(j, "plan.json").recompute_num_layers, 6);
  nlohmann::json old = j;
  old.erase("recompute_num_layers");  // plans written before the field: every block
  EXPECT_EQ(config_from_json(old, "plan.json").recompute_num_layers, 0);
}

}  // namespace recompute_layers_test
}  // namespace shardplan::simulator
