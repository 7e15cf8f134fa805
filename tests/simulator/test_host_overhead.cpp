// device.host_overhead_seconds (measured profiles): the framework's host time per block, charged
// on every block of every micro-batch, forward and backward (and again when the forward is
// recomputed): by block style, an MoE block's router and dispatch plus its rank's experts, each
// adapter; read, written back, bad entries named; datasheet profiles have none.
#include <gtest/gtest.h>

#include <string>

#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace host_overhead_test {  // named, not anonymous: the files share a unity-build unit

using testing::config;

HostOverhead overhead() {
  HostOverhead h;
  h.llama_block = {3e-4, 5e-4};
  h.gpt2_block = {2e-4, 7e-4};
  h.moe_layer = {4e-4, 6e-4};
  h.moe_expert = {2e-5, 4e-5};
  h.lora_adapter = {1e-5, 3e-5};
  h.measured = true;
  return h;
}

ClusterSpec cpu(bool with_overhead, int devices) {
  HardwareProfile hw = load_hardware("local-cpu-2core");
  if (with_overhead) hw.device.host_overhead = overhead();
  return ClusterSpec{hw, 1, devices};
}

// Forward, backward (+ recompute) compute of the critical stage with the overhead less without.
std::pair<double, double> added(const ModelSpec& m, ParallelConfig cfg, int devices) {
  const Prediction with = simulate(m, cpu(true, devices), cfg);
  const Prediction without = simulate(m, cpu(false, devices), cfg);
  return {with.time.forward_compute_s - without.time.forward_compute_s,
          with.time.backward_compute_s + with.time.recompute_s - without.time.backward_compute_s -
              without.time.recompute_s};
}

ParallelConfig one_rank(int micro_batches, int mbs = 2) {
  ParallelConfig cfg = config(cpu(false, 1), 1, 1, 0, mbs, mbs * micro_batches, 128);
  cfg.precision = Precision::fp32;
  cfg.attention = AttentionKind::eager;
  return cfg;
}

TEST(HostOverhead, EveryBlockOfEveryMicroBatchByStyle) {
  const HostOverhead h = overhead();
  for (const char* name : {"tiny-llama", "tiny-gpt"}) {
    const ModelSpec m = load_model(name);
    const PassSeconds& block = std::string(name) == "tiny-llama" ? h.llama_block : h.gpt2_block;
    for (int micro_batches : {1, 4}) {
      const auto [fwd, bwd] = added(m, one_rank(micro_batches), 1);
      const double blocks = static_cast<double>(m.num_layers) * micro_batches;
      EXPECT_NEAR(fwd, blocks * block.forward, 1e-12) << name << " x" << micro_batches;
      EXPECT_NEAR(bwd, blocks * block.backward, 1e-12) << name << " x" << micro_batches;
    }
  }
}

TEST(HostOverhead, RecomputedForwardPaysItAgain) {
  const ModelSpec m = load_model("tiny-llama");
  ParallelConfig cfg = one_rank(2);
  cfg.recompute = Recompute::full;
  const auto [fwd, bwd] = added(m, cfg, 1);
  const double blocks = static_cast<double>(m.num_layers) * 2;
  EXPECT_NEAR(fwd, blocks * overhead().llama_block.forward, 1e-12);
  EXPECT_NEAR(bwd, blocks * (overhead().llama_block.backward + overhead().llama_block.forward), 1e-12);
}

TEST(HostOverhead, AdaptersAndExpertsOnTheRank) {
  const HostOverhead h = overhead();
  {  // LoRA on q and v: two adapters per block
    const ModelSpec m = load_model("tiny-llama");
    ParallelConfig cfg = one_rank(1);
    cfg.lora.rank = 8;
    cfg.lora.targets = {"q_proj", "v_proj"};
    const auto [fwd, bwd] = added(m, cfg, 1);
    EXPECT_NEAR(fwd, m.num_layers * (h.llama_block.forward + 2 * h.lora_adapter.forward), 1e-12);
    EXPECT_NEAR(bwd, m.num_layers * (h.llama_block.backward + 2 * h.lora_adapter.backward), 1e-12);
  }
  const ModelSpec moe = load_model("tiny-moe");
  const double dense = static_cast<double>(moe.moe.first_dense_layers), sparse = moe.num_layers - dense;
  const double E = static_cast<double>(moe.moe.num_experts);
  for (int ep : {1, 2}) {  // each rank runs E/ep experts
    ParallelConfig cfg = config(cpu(false, 2), 1, 1, 1, 2, 4, 128);
    cfg.precision = Precision::fp32;
    cfg.attention = AttentionKind::eager;
    cfg.ep = ep;
    const auto [fwd, bwd] = added(moe, cfg, 2);
    EXPECT_NEAR(fwd, dense * h.llama_block.forward + sparse * (h.moe_layer.forward + E / ep * h.moe_expert.forward),
                1e-12)
        << "ep " << ep;
    EXPECT_NEAR(bwd, dense * h.llama_block.backward + sparse * (h.moe_layer.backward + E / ep * h.moe_expert.backward),
                1e-12)
        << "ep " << ep;
  }
}

std::string error_of(const nlohmann::json& host) {
  nlohmann::json j = to_json(load_hardware("local-cpu-2core"));
  j["device"]["host_overhead_seconds"] = host;
  try {
    (void)hardware_from_json(j, "measured.json");
  } catch (const InputError& e) { return e.what(); }
  return "";
}

TEST(HostOverhead, LoadsRoundTripsAndNamesBadFields) {
  HardwareProfile hw = load_hardware("local-cpu-2core");
  EXPECT_FALSE(hw.device.host_overhead.measured);
  EXPECT_FALSE(to_json(hw)["device"].contains("host_overhead_seconds"));
  EXPECT_FALSE(load_hardware("p4d.24xlarge").device.host_overhead.measured);  // a GPU hides it
  hw.device.host_overhead = overhead();
  const HardwareProfile again = hardware_from_json(to_json(hw), "again.json");
  ASSERT_TRUE(again.device.host_overhead.measured);
  EXPECT_DOUBLE_EQ(again.device.host_overhead.moe_expert.backward, 4e-5);
  EXPECT_DOUBLE_EQ(again.device.host_overhead.gpt2_block.forward, 2e-4);

  const nlohmann::json pass = {{"forward", 1e-4}, {"backward", 2e-4}};
  EXPECT_EQ(error_of({{"llama_block", pass}}), "");
  const std::string unknown = error_of({{"bert_block", pass}});
  EXPECT_NE(unknown.find("host_overhead_seconds"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("bert_block"), std::string::npos) << unknown;
  const std::string negative = error_of({{"moe_expert", {{"forward", -1e-4}, {"backward", 0}}}});
  EXPECT_NE(negative.find("forward"), std::string::npos) << negative;
  const std::string missing = error_of({{"lora_adapter", {{"forward", 1e-5}}}});
  EXPECT_NE(missing.find("backward"), std::string::npos) << missing;
  EXPECT_NE(error_of(3.0).find("host_overhead_seconds"), std::string::npos);
}

}  // namespace host_overhead_test
}  // namespace shardplan::simulator
