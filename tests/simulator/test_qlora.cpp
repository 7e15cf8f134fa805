// QLoRA (LoraConfig::base = nf4): the frozen base linears held as 4-bit NormalFloat with
// double-quantised constants (Dettmers et al. 2023: 0.5 byte + 8 bits per 64 weights + 32 bits
// per 64 x 256 weights), everything else as in LoRA; the dequantisation costs time at each use;
// ZeRO-3 gathers the 4-bit storage; bad combinations are refused; plan JSON keeps the base.
#include <gtest/gtest.h>

#include <string>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace qlora_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::linear_weights;
using testing::run;

ParallelConfig lora_config(const ClusterSpec& c, int zero, LoraBase base) {
  ParallelConfig cfg = config(c, 1, 1, zero, 1, c.devices(), 2048);
  cfg.lora.rank = 16;
  cfg.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  cfg.lora.base = base;
  return cfg;
}

TEST(QLora, BaseLinearsTakeHalfAByteAndTheirConstants) {
  const double per_weight = 0.5 + 8.0 / 64 / 8 + 32.0 / (64 * 256) / 8;  // Dettmers et al. 2023, §3
  EXPECT_DOUBLE_EQ(kNf4BytesPerWeight, per_weight);
  const ModelSpec m = load_model("llama2-70b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  const Prediction lora = run(m, c, lora_config(c, 1, LoraBase::bf16));
  const Prediction qlora = run(m, c, lora_config(c, 1, LoraBase::nf4));
  const double W = m.num_layers * linear_weights(m, 1);
  const double other = lora.worst.parameters - 2 * W;  // embeddings, norms, head: still 16-bit
  EXPECT_NEAR(qlora.worst.parameters, other + per_weight * W, 1e-6 * W);
  EXPECT_DOUBLE_EQ(qlora.worst.lora, lora.worst.lora);  // adapters and their states unchanged
  EXPECT_DOUBLE_EQ(qlora.trainable_parameters, lora.trainable_parameters);
  // Dequantising each weight before its forward GEMM and its dgrad costs time; FLOPs unchanged.
  EXPECT_GT(qlora.time.forward_compute_s, lora.time.forward_compute_s);
  EXPECT_GT(qlora.time.backward_compute_s, lora.time.backward_compute_s);
  EXPECT_DOUBLE_EQ(qlora.model_flops_per_step, lora.model_flops_per_step);
}

TEST(QLora, ZeroThreeShardsAndGathersTheFourBitStorage) {
  const ModelSpec m = load_model("llama2-13b");
  const ClusterSpec c = cluster("p4de.24xlarge", 2);
  const Prediction lora = run(m, c, lora_config(c, 3, LoraBase::bf16));
  const Prediction qlora = run(m, c, lora_config(c, 3, LoraBase::nf4));
  const double W = m.num_layers * linear_weights(m, 1);
  EXPECT_NEAR(lora.worst.parameters - qlora.worst.parameters, (2 - kNf4BytesPerWeight) * W / 16, 1e-6 * W);
  EXPECT_LT(qlora.time.dp_total_comm_s, lora.time.dp_total_comm_s);
}

TEST(QLora, RefusedWithoutAdaptersOrWithFp8AndKeptInPlanJson) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = lora_config(c, 1, LoraBase::nf4);
  cfg.lora.rank = 0;
  cfg.lora.targets.clear();
  EXPECT_THROW(validate_config(m, c, cfg), InputError);
  cfg = lora_config(c, 1, LoraBase::nf4);
  cfg.fp8 = Fp8Recipe::delayed;
  try {
    validate_config(m, c, cfg);
    FAIL() << "nf4 with fp8 accepted";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("--lora-base"), std::string::npos) << e.what(); }
  cfg.fp8 = Fp8Recipe::none;
  EXPECT_EQ(config_from_json(to_json(cfg), "round trip").lora.base, LoraBase::nf4);
  nlohmann::json old = to_json(cfg);
  old["lora"].erase("base");
  EXPECT_EQ(config_from_json(old, "old plan").lora.base, LoraBase::bf16);
}

}  // namespace qlora_test
}  // namespace shardplan::simulator
