// Mixture of experts with expert parallelism in the cost model: model-state memory against the
// closed form per ZeRO stage and ep, routed activations linear in top-k and not in the expert
// count, the dispatch volume and the all-to-all time against their formulas, the load-imbalance
// term, FLOPs independent of the layout, dense-first blocks, and one-line refusals.
#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <cmath>
#include <string>

#include "simulator/collectives.hpp"
#include "simulator/errors.hpp"
#include "simulator/moe_cost.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace moe_test {  // named, not anonymous: the files share a unity-build unit

using testing::refusal;

using testing::cluster;
using testing::config;
using testing::model_states;
using testing::run;

// Mistral-7B's shapes with 8 routed experts of its FFN width, top-2: Mixtral-8x7B's block.
ModelSpec moe_model(int experts = 8, int top_k = 2) {
  ModelSpec m = load_model("mistral-7b");
  m.name = "moe-test";
  m.moe.num_experts = experts;
  m.moe.top_k = top_k;
  m.moe.expert_ffn_hidden = m.ffn_hidden;
  validate_model(m, "test");
  return m;
}

ParallelConfig moe_config(const ClusterSpec& c, int ep, int zero) {
  ParallelConfig cfg = config(c, 1, 1, zero, 1, 64, 4096);
  cfg.ep = ep;
  return cfg;
}

TEST(Moe, ParameterCountsSplitIntoDenseAndRoutedParts) {
  const ModelSpec m = moe_model();
  const ParameterCounts n = count_parameters(m);
  const double expert = 3.0 * m.hidden * m.moe.expert_ffn_hidden;  // gate, up, down
  EXPECT_EQ(n.per_expert, static_cast<int64_t>(expert));
  EXPECT_EQ(n.per_layer_experts, 8 * n.per_expert);
  EXPECT_EQ(n.total - n.active, m.num_layers * 6 * n.per_expert);  // 6 of 8 experts skipped per token
  const ParameterCounts dense = count_parameters(load_model("mistral-7b"));
  // Replacing the MLP by 8 experts of its width and a router: + 7 MLPs + h x 8 per layer.
  EXPECT_EQ(n.total - dense.total, m.num_layers * (7 * n.per_expert + m.hidden * 8));
}

// Model states of one device: dense part D and this rank's experts X, each sharded by its own
// group (dp for D, the expert data-parallel group for X) as the ZeRO stage says.
TEST(Moe, ModelStateMemoryMatchesClosedFormPerZeroStageAndEp) {
  const ModelSpec m = moe_model(16, 2);
  const ClusterSpec c = cluster("p5.48xlarge", 2);  // 16 GPUs
  const ParameterCounts n = count_parameters(m);
  const double all_experts = static_cast<double>(m.num_layers) * n.per_layer_experts;
  const double D = static_cast<double>(n.total) - all_experts;
  for (int ep : {1, 2, 4, 8, 16}) {
    for (int zero : {0, 1, 2, 3}) {
      SCOPED_TRACE("ep " + std::to_string(ep) + " zero " + std::to_string(zero));
      const Prediction p = run(m, c, moe_config(c, ep, zero));
      const double X = all_experts / ep, dp = 16, edp = 16.0 / ep;
      auto states = [&](double P, double N) {  // 2 + 2 + 12 bytes (ZeRO §3), by stage
        return (zero >= 3 ? 2 * P / N : 2 * P) + (zero >= 2 ? 2 * P / N : 2 * P) + (zero >= 1 ? 12 * P / N : 12 * P);
      };
      EXPECT_NEAR(model_states(p.worst), states(D, dp) + states(X, edp), 1e-9 * states(D + X, 1));
      EXPECT_EQ(p.stages[0].parameters_per_device, static_cast<int64_t>(D + X));
    }
  }
}

// LoRA whose targets name expert linears by suffix (PEFT: "gate_proj" adapts experts.{e}.gate_proj
// too): every expert's adapters are trainable, and each rank holds its E/ep experts' adapters with
// their full states, sharded over the expert data-parallel group as the ZeRO stage says.
TEST(Moe, LoraOnExpertsCountsEveryExpertsAdaptersShardedByEp) {
  const ModelSpec m = moe_model(16, 2);
  const ClusterSpec c = cluster("p5.48xlarge", 2);  // 16 GPUs
  const int64_t r = 8, h = m.hidden, f = m.moe.expert_ffn_hidden;
  const double per_expert = r * 3.0 * (h + f);  // gate, up (h -> f), down (f -> h): r (d_in + d_out) each
  LoraConfig attn;
  attn.rank = r;
  attn.targets = {"q_proj"};
  LoraConfig experts = attn;
  experts.targets = {"q_proj", "gate_proj", "up_proj", "down_proj"};  // also the experts'
  for (int ep : {1, 4, 16}) {
    for (int zero : {0, 2, 3}) {
      SCOPED_TRACE("ep " + std::to_string(ep) + " zero " + std::to_string(zero));
      ParallelConfig a = moe_config(c, ep, zero), b = a;
      a.lora = attn;
      b.lora = experts;
      const Prediction pa = run(m, c, a), pb = run(m, c, b);
      const double XL = m.num_layers * 16.0 * per_expert;  // all experts' adapters
      EXPECT_EQ(pb.trainable_parameters - pa.trainable_parameters, static_cast<int64_t>(XL));
      const double local = XL / ep, edp = 16.0 / ep;  // this rank's, and its shard group
      const double states = (zero >= 3 ? 2 * local / edp : 2 * local) + (zero >= 2 ? 2 * local / edp : 2 * local) +
                            12 * local / (zero >= 1 ? edp : 1);
      EXPECT_NEAR(pb.worst.lora - pa.worst.lora, states, 1e-6 * states);
      EXPECT_GT(pb.time.step_s, pa.time.step_s);  // the adapters' GEMMs on the routed tokens
    }
  }
}

double block_activations(const ModelSpec& m, const ClusterSpec& c, ParallelConfig cfg) {
  validate_config(m, c, cfg);
  const Evaluator ev(m, c);
  return ConfigContext(ev.context(), cfg).block.stored_activation_bytes;
}

TEST(Moe, RoutedActivationsScaleWithTopKNotExpertCount) {
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const ParallelConfig cfg = moe_config(c, 1, 1);
  const double k1 = block_activations(moe_model(64, 1), c, cfg);
  const double k2 = block_activations(moe_model(64, 2), c, cfg);
  const double k4 = block_activations(moe_model(64, 4), c, cfg);
  EXPECT_GT(k2 - k1, 0);
  EXPECT_NEAR(k4 - k2, 2 * (k2 - k1), 1e-9 * k4);  // linear in k
  // 8x the experts adds only the router's fp32 probabilities: 4 bytes x tokens x experts.
  const double e8 = block_activations(moe_model(8, 2), c, cfg);
  const double tokens = cfg.seq_len * cfg.micro_batch_size;
  EXPECT_NEAR(k2 - e8, 4 * tokens * (64 - 8), 1e-9 * k2);
}

TEST(Moe, DispatchVolumeAndAllToAllTimeFollowTheFormula) {
  const ModelSpec m = moe_model(16, 2);
  const ClusterSpec c = cluster("p5.48xlarge", 2);
  ParallelConfig cfg = moe_config(c, 8, 1);
  validate_config(m, c, cfg);
  const Evaluator ev(m, c);
  const ConfigContext ctx(ev.context(), cfg);
  const MoeLayerCost moe = moe_layer_cost(ctx.env, true);
  const double T = cfg.seq_len * cfg.micro_batch_size;
  EXPECT_DOUBLE_EQ(moe.dispatch_bytes, 2.0 * T * m.moe.top_k * m.hidden);  // bf16 copies of T*k tokens
  // Within one node: (r-1)/n of the buffer over the node's links, plus one latency.
  const HardwareProfile& hw = c.hardware;
  const GroupPlacement node{8, 1, 8}, two_nodes{16, 2, 8};
  const double S = 64e6;
  EXPECT_DOUBLE_EQ(all_to_all_s(S, node, hw, 8),
                   7.0 / 8 * S / intra_node_bandwidth(hw, 8, 8) + hw.node.intra.latency_s);
  // Across nodes: half the buffer goes to the other node over this rank's eighth of the NICs.
  const double nic = hw.network.bandwidth_Bps * hw.network.efficiency / 8;
  EXPECT_DOUBLE_EQ(all_to_all_s(S, two_nodes, hw, 8),
                   std::max(7.0 / 16 * S / intra_node_bandwidth(hw, 8, 8) + hw.node.intra.latency_s,
                            8.0 / 16 * S / nic + hw.network.latency_s));
  // Forward: dispatch + combine at the busiest rank's load.
  EXPECT_DOUBLE_EQ(moe.comm_forward_s, 2 * all_to_all_s(moe.load_imbalance * moe.dispatch_bytes, node, hw, 8));
  // ep 16 spans both nodes: its all-to-alls are slower than ep 8's inside one node.
  cfg.ep = 16;
  EXPECT_GT(run(m, c, cfg).time.ep_comm_s, run(m, c, moe_config(c, 8, 1)).time.ep_comm_s);
}

TEST(Moe, LoadImbalanceIsOneWithoutEpFallsWithTokensAndIsCappedByCapacity) {
  const ModelSpec m = moe_model();
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Evaluator ev(m, c);
  auto lambda = [&](int ep, int seq, double capacity) {
    ParallelConfig cfg = moe_config(c, ep, 1);
    cfg.seq_len = seq;
    cfg.moe_capacity_factor = capacity;
    validate_config(m, c, cfg);
    return moe_load_imbalance(ConfigContext(ev.context(), cfg).env);
  };
  EXPECT_DOUBLE_EQ(lambda(1, 4096, 0), 1.0);
  EXPECT_GT(lambda(8, 512, 0), lambda(8, 4096, 0));
  EXPECT_GT(lambda(8, 4096, 0), 1.0);
  EXPECT_GT(lambda(8, 64, 0), 1.05);
  EXPECT_DOUBLE_EQ(lambda(8, 64, 1.05), 1.05);
}

TEST(Moe, ModelFlopsDoNotDependOnTheExpertLayout) {
  const ModelSpec m = moe_model();
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const double ep1 = run(m, c, moe_config(c, 1, 1)).model_flops_per_step;
  EXPECT_NEAR(run(m, c, moe_config(c, 8, 1)).model_flops_per_step, ep1, 1e-9 * ep1);
  ParallelConfig tp = moe_config(c, 2, 1);
  tp.tp = 2;
  tp.dp = 4;
  tp.sequence_parallel = true;
  tp.global_batch_size = 32;
  const ParallelConfig half = [&] {
    ParallelConfig h = moe_config(c, 1, 1);
    h.global_batch_size = 32;
    h.dp = 8;
    return h;
  }();
  const double base = run(m, c, half).model_flops_per_step;
  EXPECT_NEAR(run(m, c, tp).model_flops_per_step, base, 1e-9 * base);
  // Per token about 6 x the active parameters (Kaplan et al. 2020) plus attention: well under
  // 6 x the total.
  const ParameterCounts n = count_parameters(m);
  const double tokens = 64.0 * 4096;
  EXPECT_GT(ep1 / tokens, 6.0 * (n.active - 2 * m.vocab_size * m.hidden));
  EXPECT_LT(ep1 / tokens, 6.0 * n.total * 0.5);
}

TEST(Moe, FirstDenseBlocksCostTheirOwnMlp) {
  ModelSpec m = moe_model();
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Prediction all_moe = run(m, c, moe_config(c, 8, 1));
  m.moe.first_dense_layers = 4;
  const Prediction some_dense = run(m, c, moe_config(c, 8, 1));
  // 4 blocks hold one MLP instead of 8/8 experts and a router: fewer parameters, no less compute
  // per token than top-2 of 8 experts would need... dense MLP runs 1 FFN, routed runs 2.
  EXPECT_LT(some_dense.stages[0].parameters_per_device, all_moe.stages[0].parameters_per_device);
  EXPECT_LT(some_dense.model_flops_per_step, all_moe.model_flops_per_step);
  EXPECT_LT(some_dense.time.ep_comm_s, all_moe.time.ep_comm_s);
}

TEST(Moe, BadInputIsOneLineNamingTheField) {
  const ModelSpec m = moe_model();
  const ClusterSpec c = cluster("p5.48xlarge", 2);
  ParallelConfig cfg = moe_config(c, 3, 1);
  EXPECT_NE(refusal(m, c, cfg).find("--ep: expected a divisor of the model's 8 experts"), std::string::npos);
  cfg.ep = 8;
  cfg.etp = 4;
  EXPECT_NE(refusal(m, c, cfg).find("--ep"), std::string::npos);  // 8 x 4 does not divide 16 ranks
  cfg = moe_config(c, 2, 1);
  cfg.tp = 2;
  cfg.dp = 8;
  EXPECT_NE(refusal(m, c, cfg).find("--sequence-parallel"), std::string::npos);
  cfg = moe_config(c, 2, 1);
  cfg.moe_capacity_factor = 0.5;
  EXPECT_NE(refusal(m, c, cfg).find("--moe-capacity-factor"), std::string::npos);
  cfg = moe_config(c, 2, 1);
  EXPECT_NE(refusal(load_model("mistral-7b"), c, cfg).find("--ep: expected 1: model 'mistral-7b' has no experts"),
            std::string::npos);
  // A dense plan whose tp was edited keeps its old expert_tensor_parallel: ignored, not refused.
  ParallelConfig dense = config(c, 2, 1, 1, 1, 64, 4096);
  dense.etp = 8;
  EXPECT_EQ(refusal(load_model("mistral-7b"), c, dense), "");
  for (const std::string& s : {refusal(m, c, moe_config(c, 3, 1))}) EXPECT_EQ(s.find('\n'), std::string::npos);
  ModelSpec bad = moe_model();
  bad.moe.top_k = 9;
  try {
    validate_model(bad, "card.json");
    ADD_FAILURE() << "top_k > experts accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("card.json: field 'moe.top_k'"), std::string::npos) << e.what();
  }
}

TEST(Moe, ConfigRoundTripsThroughPlanJson) {
  const ModelSpec m = moe_model();
  const ClusterSpec c = cluster("p5.48xlarge", 2);
  ParallelConfig cfg = moe_config(c, 4, 1);
  cfg.moe_capacity_factor = 1.25;
  validate_config(m, c, cfg);
  ParallelConfig back = config_from_json(to_json(cfg), "plan.json");
  validate_config(m, c, back);
  EXPECT_EQ(back.ep, 4);
  EXPECT_EQ(back.expert_tp(), 1);
  EXPECT_DOUBLE_EQ(back.moe_capacity_factor, 1.25);
  EXPECT_EQ(to_json(back).dump(), to_json(cfg).dump());
}

}  // namespace moe_test
}  // namespace shardplan::simulator
