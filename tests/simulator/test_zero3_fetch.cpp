// ZeRO-3 fetched tensor by tensor, every collective blocking (zero3_fetch = per_tensor_sync,
// DeepSpeed <= 0.4.0): the block's tensors against the parameter count, the cost growing with the
// sharding group at a fixed per-rank batch (n copies and n Python views per collective, a ring of
// n steps), the host's view loop alone on an ideal network, nothing
// hidden, the re-fetch of a fully recomputed block, a module rather than a unit gathered in
// memory, the config check and the JSON round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "simulator/zero3_fetch.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace zero3_fetch_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

ModelContext context(const char* model) {
  ModelContext mc;
  mc.model = load_model(model);
  mc.linears = mc.model.block_linears();
  mc.lora_mask.assign(mc.linears.size(), 0);
  mc.counts = count_parameters(mc.model);
  return mc;
}

double sum_elements(const std::vector<ParamTensor>& ts) {
  return std::accumulate(ts.begin(), ts.end(), 0.0, [](double a, const ParamTensor& t) { return a + t.elements; });
}

TEST(Zero3Fetch, BlockTensorsAddUpToTheBlockParameterCount) {
  for (const char* name : {"gpt2-xl", "llama2-7b", "gpt-neox-20b"}) {
    const ModelContext mc = context(name);
    for (int tp : {1, 2, 4}) {
      const auto ts = block_param_tensors(mc, tp);
      EXPECT_DOUBLE_EQ(sum_elements(ts),
                       static_cast<double>(per_rank(mc.counts.per_layer, mc.counts.per_layer_tp_sharded, tp)))
          << name << " tp=" << tp;
    }
  }
  // GPT-2: c_attn, attn.c_proj, c_fc, mlp.c_proj with biases, two LayerNorms (weight + bias).
  EXPECT_EQ(block_param_tensors(context("gpt2-xl"), 1).size(), 12u);
  // Llama: q, k, v, o, gate, up, down without biases, two RMSNorms.
  EXPECT_EQ(block_param_tensors(context("llama2-7b"), 1).size(), 9u);
}

TEST(Zero3Fetch, LargestModuleIsTheLargestLinear) {
  const ModelContext mc = context("gpt2-xl");  // h 1600, ffn 6400: c_fc 1600 x 6400 + bias
  EXPECT_DOUBLE_EQ(largest_fetched_module(mc, 1), 1600.0 * 6400 + 6400);
  EXPECT_DOUBLE_EQ(largest_fetched_module(mc, 2), (1600.0 * 6400 + 6400) / 2);
}

ParallelConfig zero3(const ClusterSpec& c, Zero3Fetch f, Recompute r = Recompute::full, int seq = 2048) {
  ParallelConfig cfg = config(c, 1, 1, 3, 1, c.devices(), seq);
  cfg.zero3_fetch = f;
  cfg.recompute = r;
  cfg.precision = Precision::fp16;
  return cfg;
}

TEST(Zero3Fetch, BlockingPerTensorFetchIsSlowerAndHidesNothing) {
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec c = cluster("p4de.24xlarge", 48);
  const Prediction unit = run(m, c, zero3(c, Zero3Fetch::prefetch));
  const Prediction sync = run(m, c, zero3(c, Zero3Fetch::per_tensor_sync));
  ASSERT_TRUE(sync.feasible) << sync.infeasible_reason;
  EXPECT_GT(sync.time.step_s, unit.time.step_s);
  EXPECT_GT(sync.time.dp_exposed_comm_s, unit.time.dp_exposed_comm_s);
  EXPECT_DOUBLE_EQ(sync.time.dp_overlapped_comm_s, 0.0);
  EXPECT_NEAR(sync.time.dp_exposed_comm_s, sync.time.dp_total_comm_s, 1e-9 * sync.time.dp_total_comm_s);
  // The compute is the same; only the ZeRO traffic differs.
  EXPECT_DOUBLE_EQ(sync.time.forward_compute_s, unit.time.forward_compute_s);
}

TEST(Zero3Fetch, CostPerCollectiveGrowsWithTheShardingGroup) {
  // One sample per rank at every size: the bytes each rank moves stay the same (the ring's
  // (n-1)/n), so what grows is the n copies and the n-step ring of each of the many collectives.
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec small = cluster("p4de.24xlarge", 16), large = cluster("p4de.24xlarge", 128);
  auto comm = [&](const ClusterSpec& c, Zero3Fetch f) { return run(m, c, zero3(c, f)).time.dp_total_comm_s; };
  const double sync_growth = comm(large, Zero3Fetch::per_tensor_sync) - comm(small, Zero3Fetch::per_tensor_sync);
  const double unit_growth = comm(large, Zero3Fetch::prefetch) - comm(small, Zero3Fetch::prefetch);
  std::printf("growth of ZeRO-3 traffic time, 128 -> 1024 ranks: per_tensor_sync %.2f s, prefetch %.2f s\n",
              sync_growth, unit_growth);
  EXPECT_GT(sync_growth, 0.0);
  // Roughly 12x more collectives per block (a GPT block has 12 tensors; biases and norms below the
  // persistence threshold are not fetched but their gradients are reduce-scattered).
  EXPECT_GT(sync_growth, 4.0 * unit_growth);
}

TEST(Zero3Fetch, EachRankCostsTheHostEvenOnAnIdealNetwork) {
  // DeepSpeed builds each collective's list of n views in a Python loop: with free kernel
  // launches and links of no latency and (nearly) unbounded bandwidth, a larger group still costs
  // every collective more host time.
  const ModelSpec m = load_model("gpt3-175b");
  auto ideal = [](ClusterSpec c) {
    c.hardware.device.kernel_launch_s = 0;
    for (LinkProfile* link : {&c.hardware.node.intra, &c.hardware.network}) {
      link->latency_s = 0;
      link->bandwidth_Bps = 1e18;
      link->busbw_by_bytes = {};
    }
    return c;
  };
  const ClusterSpec small = ideal(cluster("p4de.24xlarge", 16)), large = ideal(cluster("p4de.24xlarge", 128));
  auto comm = [&](const ClusterSpec& c) {
    return run(m, c, zero3(c, Zero3Fetch::per_tensor_sync)).time.dp_total_comm_s;
  };
  const double growth = comm(large) - comm(small);
  // 1,024 vs 128 ranks: 896 more views for each of the step's thousands of collectives.
  EXPECT_GT(growth, 1.0) << "small " << comm(small) << " s, large " << comm(large) << " s";
}

TEST(Zero3Fetch, EachRanksCopyIsTimedAtItsOwnSize) {
  // PyTorch copies a per-tensor collective's flat buffer into (or out of) its n views with one
  // kernel of S / n bytes per rank. A memory curve that is slow below a few MB (and as fast as a
  // flat one from 64 MB, so the whole-buffer passes cost the same) must cost more the smaller
  // the copies get: more at 1,024 ranks than at 128. Were the copies timed as one pass over S,
  // both differences would be equal.
  const ModelSpec m = load_model("gpt3-175b");
  auto with_curve = [](ClusterSpec c, EfficiencyCurve curve) {
    c.hardware.device.memory_efficiency = std::move(curve);
    c.hardware.device.kernel_launch_s = 0;
    return c;
  };
  const EfficiencyCurve flat{{0.0}, {1.0}}, slow_small{{std::log10(2e6), std::log10(64e6)}, {0.1, 1.0}};
  auto comm = [&](int nodes, const EfficiencyCurve& curve) {
    const ClusterSpec c = with_curve(cluster("p4de.24xlarge", nodes), curve);
    return run(m, c, zero3(c, Zero3Fetch::per_tensor_sync)).time.dp_total_comm_s;
  };
  const double extra_small = comm(16, slow_small) - comm(16, flat);
  const double extra_large = comm(128, slow_small) - comm(128, flat);
  EXPECT_GT(extra_small, 0.0);
  EXPECT_GT(extra_large, 1.5 * extra_small)
      << "128 ranks +" << extra_small << " s, 1,024 ranks +" << extra_large << " s";
}

TEST(Zero3Fetch, FullRecomputeFetchesEveryBlockAgain) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4d.24xlarge", 4);
  const double none = run(m, c, zero3(c, Zero3Fetch::per_tensor_sync, Recompute::none, 1024)).time.dp_exposed_comm_s;
  const double full = run(m, c, zero3(c, Zero3Fetch::per_tensor_sync, Recompute::full, 1024)).time.dp_exposed_comm_s;
  // Forward fetches F, backward fetches F (+F again under full recompute) plus the reduce-scatters.
  EXPECT_GT(full, none);
  EXPECT_LT(full, 1.5 * none);
}

TEST(Zero3Fetch, OneModuleIsGatheredInsteadOfAWholeBlock) {
  const ModelSpec m = load_model("gpt3-175b");
  const ClusterSpec c = cluster("p4de.24xlarge", 48);
  const Prediction unit = run(m, c, zero3(c, Zero3Fetch::prefetch));
  const Prediction sync = run(m, c, zero3(c, Zero3Fetch::per_tensor_sync));
  // Same model states and activations; the transient holds a linear (4h^2) rather than a block (12h^2).
  EXPECT_DOUBLE_EQ(testing::model_states(sync.worst), testing::model_states(unit.worst));
  EXPECT_DOUBLE_EQ(sync.worst.activations, unit.worst.activations);
  EXPECT_LT(sync.worst.workspace, unit.worst.workspace);
}

TEST(Zero3Fetch, NeedsStageThree) {
  const ModelSpec m = load_model("gpt2-xl");
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 2, 1, 8, 1024);
  cfg.zero3_fetch = Zero3Fetch::per_tensor_sync;
  try {
    validate_config(m, c, cfg);
    FAIL() << "per_tensor_sync with ZeRO-2 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--zero3-fetch"), std::string::npos) << e.what();
  }
}

TEST(Zero3Fetch, ConfigJsonRoundTripAndDefault) {
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 1024);
  cfg.zero3_fetch = Zero3Fetch::per_tensor_sync;
  nlohmann::json j = to_json(cfg);
  EXPECT_EQ(j.at("zero3_fetch"), "per_tensor_sync");
  EXPECT_EQ(config_from_json(j, "plan.json").zero3_fetch, Zero3Fetch::per_tensor_sync);
  j.erase("zero3_fetch");  // plans written before the field: today's fetch
  EXPECT_EQ(config_from_json(j, "plan.json").zero3_fetch, Zero3Fetch::prefetch);
  j["zero3_fetch"] = "per_param";
  try {
    config_from_json(j, "plan.json");
    FAIL() << "an unknown fetch was accepted";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("zero3_fetch"), std::string::npos) << e.what(); }
}

}  // namespace zero3_fetch_test
}  // namespace shardplan::simulator
