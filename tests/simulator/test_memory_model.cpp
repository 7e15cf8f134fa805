// Memory model against closed forms: ZeRO model states (Rajbhandari et al. 2019, §3),
// activations (Korthikanti et al. 2022, §4), LoRA (Hu et al. 2021).
#include <gtest/gtest.h>

#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace memory_model_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::model_states;
using testing::run;

// Ψ: parameters one device holds before sharding (tp = pp = 1: the whole model).
struct ZeroCase {
  int zero;
  int sharding;  // 0 = dp
};

class ZeroStates : public ::testing::TestWithParam<ZeroCase> {};

TEST_P(ZeroStates, MatchClosedForm) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 2);  // 16 devices
  ParallelConfig cfg = config(c, 1, 1, GetParam().zero, 1, 16, 1024);
  cfg.sharding_degree = GetParam().sharding;
  const Prediction p = run(m, c, cfg);
  const double psi = static_cast<double>(count_parameters(m).total);
  const double N = GetParam().sharding > 0 ? GetParam().sharding : 16;
  const double expected[] = {16 * psi, 4 * psi + 12 * psi / N, 2 * psi + 14 * psi / N, 16 * psi / N};
  EXPECT_NEAR(model_states(p.worst), expected[GetParam().zero], 1e-9 * expected[0]);
  // The split, too: weights 2Ψ (/N at stage 3), gradients 2Ψ (/N from stage 2).
  EXPECT_NEAR(p.worst.parameters, GetParam().zero == 3 ? 2 * psi / N : 2 * psi, 1);
  EXPECT_NEAR(p.worst.gradients, GetParam().zero >= 2 ? 2 * psi / N : 2 * psi, 1);
  EXPECT_NEAR(p.worst.optimizer_states, GetParam().zero >= 1 ? 12 * psi / N : 12 * psi, 1);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStates,
                         ::testing::Values(ZeroCase{0, 0}, ZeroCase{1, 0}, ZeroCase{2, 0}, ZeroCase{3, 0},
                                           ZeroCase{1, 4}, ZeroCase{2, 8}, ZeroCase{3, 2}));

TEST(ZeroStates, Fp32KeepsSixteenBytesPerParameter) {
  // fp32: 4Ψ weights + 4Ψ gradients + 8Ψ moments.
  const ModelSpec m = load_model("gpt2");
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 1, 8, 512);
  cfg.precision = Precision::fp32;
  const Prediction p = run(m, c, cfg);
  const double psi = static_cast<double>(count_parameters(m).total);
  EXPECT_NEAR(model_states(p.worst), 16 * psi, 1);
  EXPECT_NEAR(p.worst.parameters, 4 * psi, 1);
}

// Autocast mixed precision keeps fp32 weights, gradients and moments (4Ψ + 4Ψ + 8Ψ), sharded by
// the same stages; only the bytes per element differ from master weights' 2Ψ + 2Ψ + 12Ψ.
TEST_P(ZeroStates, AutocastKeepsFp32WeightsGradientsAndMoments) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 2);
  ParallelConfig cfg = config(c, 1, 1, GetParam().zero, 1, 16, 1024);
  cfg.sharding_degree = GetParam().sharding;
  cfg.mixed_precision = MixedPrecision::autocast;
  const Prediction p = run(m, c, cfg);
  const double psi = static_cast<double>(count_parameters(m).total);
  const double N = GetParam().sharding > 0 ? GetParam().sharding : 16;
  const int z = GetParam().zero;
  EXPECT_NEAR(p.worst.parameters, z == 3 ? 4 * psi / N : 4 * psi, 1);
  EXPECT_NEAR(p.worst.gradients, z >= 2 ? 4 * psi / N : 4 * psi, 1);
  EXPECT_NEAR(p.worst.optimizer_states, z >= 1 ? 8 * psi / N : 8 * psi, 1);
  // Same activations and the same sixteen bytes per parameter unsharded or fully sharded.
  cfg.mixed_precision = MixedPrecision::master_weights;
  const Prediction master = run(m, c, cfg);
  EXPECT_DOUBLE_EQ(p.worst.activations, master.worst.activations);
  if (z == 0 || z == 3) {
    EXPECT_NEAR(model_states(p.worst), model_states(master.worst), 1e-9 * psi);
  } else {
    EXPECT_GT(model_states(p.worst), model_states(master.worst));
  }
}

// --- activations ---------------------------------------------------------------------------

struct ActivationFixture : ::testing::Test {
  ModelSpec m = load_model("gpt3-175b");  // GPT-style: GELU 4h MLP, dropout, MHA
  ClusterSpec c = cluster("p4de.24xlarge", 1);
  std::vector<LinearDesc> linears = m.block_linears();
  std::vector<char> mask = std::vector<char>(linears.size(), 0);
  double s = 2048, b = 1, h = 12288, a = 96;

  double bytes(int tp, bool sp, Recompute r) {
    ParallelConfig cfg;
    cfg.tp = tp;
    cfg.seq_len = static_cast<int>(s);
    cfg.micro_batch_size = static_cast<int>(b);
    cfg.sequence_parallel = sp;
    cfg.recompute = r;
    cfg.attention = AttentionKind::eager;  // Korthikanti's formulas: the s x s scores are stored
    GroupPlacement g{tp, 1, tp};
    CostEnv env = make_cost_env(m, c, cfg, linears, mask, BlockGroups{g, {}, {}, {}});
    return block_activation_bytes(env, r);
  }
};

TEST_F(ActivationFixture, GptLayerMatchesKorthikanti) {
  ASSERT_GT(m.attention_dropout, 0);  // the formulas count dropout masks
  ASSERT_GT(m.hidden_dropout, 0);
  const double sbh = s * b * h, t = 8;
  // §4.1: no parallelism.
  EXPECT_NEAR(bytes(1, false, Recompute::none), sbh * (34 + 5 * a * s / h), 1);
  // §4.2.1: tensor parallel.
  EXPECT_NEAR(bytes(8, false, Recompute::none), sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1);
  // §4.2.2: tensor + sequence parallel.
  EXPECT_NEAR(bytes(8, true, Recompute::none), sbh / t * (34 + 5 * a * s / h), 1);
  // §5: selective recompute drops the 5as/h term.
  EXPECT_NEAR(bytes(8, true, Recompute::selective), sbh / t * 34, 1);
  EXPECT_NEAR(bytes(8, false, Recompute::selective), sbh * (10 + 24 / t), 1);
  EXPECT_NEAR(bytes(1, false, Recompute::selective), sbh * 34, 1);
  // Full recompute keeps the block input: 2sbh (sharded with SP).
  EXPECT_NEAR(bytes(1, false, Recompute::full), 2 * sbh, 1);
  EXPECT_NEAR(bytes(8, true, Recompute::full), 2 * sbh / t, 1);
}

TEST(Activations, LlamaBlockDiffersFromGptFormula) {
  // SwiGLU + GQA + no dropout: fewer masks, K/V smaller, MLP stores 4 f-wide tensors.
  const ModelSpec m = load_model("llama2-70b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  auto linears = m.block_linears();
  std::vector<char> mask(linears.size(), 0);
  ParallelConfig cfg;
  cfg.seq_len = 4096;
  cfg.attention = AttentionKind::eager;  // the softmax output below (flash: test_attention_kinds.cpp)
  GroupPlacement g{1, 1, 1};
  const CostEnv env = make_cost_env(m, c, cfg, linears, mask, BlockGroups{g, {}, {}, {}});
  const double s = 4096, h = 8192, f = 28672, kv = 1024, a = 64;
  // norm1 in, qkv in, q, k, v, o in, norm2 in, mlp in: bf16; softmax out; 4 SwiGLU tensors.
  const double expected = 2 * s * (h + h + h + kv + kv + h + h + h) + 2 * a * s * s + 4 * 2 * s * f;
  EXPECT_NEAR(block_activation_bytes(env, Recompute::none), expected, 1);
  const double gpt_formula = s * h * (34 + 5 * a * s / h);
  EXPECT_GT(std::abs(expected - gpt_formula) / gpt_formula, 0.05);
}

TEST(Activations, InFlightMicroBatchesFollowTheSchedule) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    ParallelConfig cfg = config(c, 2, 4, 1, 1, 8, 1024);  // dp 1, m = 8
    cfg.schedule = sched;
    const Prediction p = run(m, c, cfg);
    for (const auto& st : p.stages) {
      const int expected = sched == PipelineSchedule::gpipe ? 8 : std::min(4 - st.stage, 8);
      EXPECT_EQ(st.in_flight_micro_batches, expected) << to_string(sched) << " stage " << st.stage;
    }
    // Middle stages hold the same layers, so activations scale with the in-flight count.
    EXPECT_NEAR(p.stages[1].memory.activations / p.stages[2].memory.activations,
                static_cast<double>(p.stages[1].in_flight_micro_batches) / p.stages[2].in_flight_micro_batches, 1e-9);
  }
}

// --- LoRA ----------------------------------------------------------------------------------

TEST(Lora, TrainableParametersAndFrozenBase) {
  const ModelSpec m = load_model("llama2-70b");
  const ClusterSpec c = cluster("gaudi2-hls2", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 4096);
  cfg.recompute = Recompute::full;
  cfg.lora.rank = 4;
  cfg.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  const Prediction p = run(m, c, cfg);
  const double r = 4, h = 8192, kv = 1024;
  const double per_layer = r * ((h + h) + (h + kv) + (h + kv) + (h + h));  // r (d_in + d_out)
  EXPECT_EQ(p.trainable_parameters, static_cast<int64_t>(80 * per_layer));
  EXPECT_EQ(p.total_parameters, 68976648192);
  // Frozen base: weights (ZeRO-3 sharded), no gradients, no optimizer states.
  EXPECT_NEAR(p.worst.parameters, 2.0 * 68976648192 / 8, 1);
  EXPECT_EQ(p.worst.gradients, 0);
  EXPECT_EQ(p.worst.optimizer_states, 0);
  // Adapters: 16 bytes per trainable parameter, sharded over 8 ranks.
  EXPECT_NEAR(p.worst.lora, 16 * 80 * per_layer / 8, 1);
}

TEST(Lora, FrozenMlpInputsDroppedAndAdapterFlopsAdded) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig full = config(c, 1, 1, 1, 1, 8, 2048);
  ParallelConfig lora = full;
  lora.lora.rank = 16;
  lora.lora.targets = {"q_proj", "v_proj"};
  const Prediction pf = run(m, c, full), pl = run(m, c, lora);
  // The frozen MLP keeps no input for weight gradients (test_frozen_inputs.cpp has the closed
  // form); the adapters' own outputs are far smaller.
  EXPECT_LT(pl.worst.activations, pf.worst.activations);
  // No weight gradients for the base: less backward compute; adapters add forward FLOPs.
  EXPECT_LT(pl.time.backward_compute_s, pf.time.backward_compute_s);
  EXPECT_GT(pl.time.forward_compute_s, pf.time.forward_compute_s);
  EXPECT_LT(pl.model_flops_per_step, pf.model_flops_per_step);
}

// A tied word embedding's two gradients (the head's, from the start of the backward, and the
// embedding's dense one) meet in autograd's input buffer and are summed out of place: at the end
// of the backward three vocab x hidden gradients live beside the model states (measured on GPT-2,
// fp32, ZeRO 0/1: `shardplan validate`, peak within 0.1 %). Untied tables, or a frozen one, have
// no such meeting.
TEST(TiedEmbeddings, TheirGradientsMeetAtTheEndOfTheBackward) {
  ModelSpec m = load_model("gpt2");
  const ClusterSpec c = cluster("p4d.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 1, 8, 128);
  cfg.precision = Precision::fp32;
  const double vocab_grad = 4.0 * static_cast<double>(m.vocab_size * m.hidden);
  auto transient = [&](const Prediction& p) { return p.worst.activations + p.worst.workspace; };
  const Prediction tied = run(m, c, cfg);
  EXPECT_GE(transient(tied), 3 * vocab_grad * (1 - 1e-9));
  m.tied_embeddings = false;
  const Prediction untied = run(m, c, cfg);
  EXPECT_LT(transient(untied), 3 * vocab_grad);
}

}  // namespace memory_model_test
}  // namespace shardplan::simulator
