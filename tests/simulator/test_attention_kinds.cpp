// Attention kinds (flash | eager): activation memory against the op-by-op closed forms
// (Korthikanti et al. 2022, §4.1, for eager; Dao 2023, §3.1.1, for the fused kernel), executed
// FLOPs of the fused kernel (FlashAttention-2 §4.1: half under a causal mask, 2.5x forward in
// backward), its time through the profile's curve or the GEMM fallback, the config's JSON round
// trip, and the profile curve's parsing, lookup and round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "simulator/step_model.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace attention_kinds_test {  // named, not anonymous: the files share a unity-build unit

using testing::cluster;
using testing::config;
using testing::run;

using testing::BlockEnv;

// Korthikanti et al. 2022, §4.1, op by op (bf16, e = 2), generalised to GQA, SwiGLU and
// dropout-free models: everything one block stores under eager attention without recompute.
double eager_closed_form(const ModelSpec& m, double s, double b, double t) {
  const double e = 2, M = s * b, h = m.hidden, a = m.num_heads, q = m.q_dim(), kv = m.kv_dim();
  const bool drop = m.attention_dropout > 0, hdrop = m.hidden_dropout > 0;
  double x = e * M * (h + h + (q + kv) / t + kv / t + q / t);  // norm1 in, qkv in, q, k, v, o in
  x += e * b * (a / t) * s * s;                                // softmax output
  if (drop) x += (1 + e) * b * (a / t) * s * s;                // dropout mask + output
  if (hdrop) x += 2 * M * h;                                   // two residual dropout masks
  x += e * M * h * (m.parallel_residual ? 1 : 2);              // norm2 in, MLP in
  x += (m.ffn_kind == FfnKind::swiglu ? 4 : 2) * e * M * m.ffn_hidden / t;
  return x;
}

// --- memory -----------------------------------------------------------------------------------

struct KindCase {
  const char* model;
  int tp;
};

class FlashMemory : public ::testing::TestWithParam<KindCase> {};

TEST_P(FlashMemory, EagerMinusFlashIsTheScoreTensorsLessTheLogSumExp) {
  const BlockEnv be(GetParam().model, "p4de.24xlarge");
  const double t = GetParam().tp, e = 2, a = be.m.num_heads;
  for (int s : {512, 2048, 4096}) {
    for (int b : {1, 2}) {
      SCOPED_TRACE(std::string(GetParam().model) + " s=" + std::to_string(s) + " b=" + std::to_string(b));
      const double eager = be.bytes(AttentionKind::eager, GetParam().tp, s, b);
      const double flash = be.bytes(AttentionKind::flash, GetParam().tp, s, b);
      const double scores = b * (a / t) * double(s) * s;
      const double s2 = e * scores + (be.m.attention_dropout > 0 ? (1 + e) * scores : 0.0);
      const double lse = 4.0 * b * (a / t) * s;  // fp32 log-sum-exp per query row
      EXPECT_NEAR(eager - flash, s2 - lse, 1e-9 * eager);
      // Eager is unchanged: the closed form, op by op.
      EXPECT_NEAR(eager, eager_closed_form(be.m, s, b, t), 1e-9 * eager);
      EXPECT_NEAR(flash, eager_closed_form(be.m, s, b, t) - s2 + lse, 1e-9 * eager);
    }
  }
}

TEST_P(FlashMemory, FlashHasNoQuadraticTerm) {
  const BlockEnv be(GetParam().model, "p4de.24xlarge");
  for (int b : {1, 4}) {
    // Every term is linear in s at fixed b: doubling s doubles the bytes exactly; eager grows faster.
    const double f1 = be.bytes(AttentionKind::flash, GetParam().tp, 1024, b);
    const double f2 = be.bytes(AttentionKind::flash, GetParam().tp, 2048, b);
    const double f4 = be.bytes(AttentionKind::flash, GetParam().tp, 4096, b);
    EXPECT_NEAR(f2 / f1, 2.0, 1e-12);
    EXPECT_NEAR(f4 / f2, 2.0, 1e-12);
    const double e1 = be.bytes(AttentionKind::eager, GetParam().tp, 1024, b);
    const double e2 = be.bytes(AttentionKind::eager, GetParam().tp, 2048, b);
    EXPECT_GT(e2 / e1, 2.0 + 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Cards, FlashMemory,
                         ::testing::Values(KindCase{"gpt3-175b", 1}, KindCase{"gpt3-175b", 2},
                                           KindCase{"llama2-70b", 1}, KindCase{"llama2-70b", 2}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_tp" + std::to_string(info.param.tp);
                           for (char& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

TEST(FlashMemory, GptDropoutCardCarriesTheDropoutTerms) {
  ASSERT_GT(load_model("gpt3-175b").attention_dropout, 0);   // the GPT case above counts mask + output
  ASSERT_EQ(load_model("llama2-70b").attention_dropout, 0);  // the Llama case only the softmax output
}

// Flash never stores more than eager with the same recompute, except under selective recompute,
// which eager uses to drop the s x s tensors and flash has nothing to drop with (it stores what
// no recompute stores): there flash keeps exactly its log-sum-exp more.
TEST(FlashMemory, NeverMoreThanEagerOverAGrid) {
  for (const char* model : {"gpt3-175b", "llama2-70b", "llama2-7b", "bert-large", "gpt2", "tiny-llama"}) {
    const BlockEnv be(model, "p5.48xlarge");
    for (int tp : {1, 2, 8}) {
      if (be.m.num_heads % tp || be.m.num_kv_heads % tp) continue;
      for (int s : {128, 512, 2048, 8192}) {
        for (int b : {1, 4}) {
          SCOPED_TRACE(std::string(model) + " tp=" + std::to_string(tp) + " s=" + std::to_string(s) +
                       " b=" + std::to_string(b));
          const double lse = 4.0 * b * (double(be.m.num_heads) / tp) * s;
          for (Recompute r : {Recompute::none, Recompute::full})
            EXPECT_LE(be.bytes(AttentionKind::flash, tp, s, b, r), be.bytes(AttentionKind::eager, tp, s, b, r));
          EXPECT_DOUBLE_EQ(be.bytes(AttentionKind::flash, tp, s, b, Recompute::full),
                           be.bytes(AttentionKind::eager, tp, s, b, Recompute::full));
          const double fs = be.bytes(AttentionKind::flash, tp, s, b, Recompute::selective);
          EXPECT_DOUBLE_EQ(fs, be.bytes(AttentionKind::flash, tp, s, b, Recompute::none));
          EXPECT_NEAR(fs - be.bytes(AttentionKind::eager, tp, s, b, Recompute::selective), lse, 1e-9 * fs);
          EXPECT_LE(fs, be.bytes(AttentionKind::eager, tp, s, b, Recompute::none));
        }
      }
    }
  }
}

TEST(FlashMemory, WholeModelActivationsShrinkAndEagerMatchesItsBlocks) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 2, 1, 1, 1, 4, 4096);
  cfg.attention = AttentionKind::eager;
  const Prediction eager = run(m, c, cfg);
  cfg.attention = AttentionKind::flash;
  const Prediction flash = run(m, c, cfg);
  // 32 blocks x (softmax output 2·b·(a/t)·s² - LSE 4·b·(a/t)·s), a/t = 16, nothing else differs.
  const double per_block = 2.0 * 16 * 4096.0 * 4096 - 4.0 * 16 * 4096;
  EXPECT_NEAR(eager.worst.activations - flash.worst.activations, 32 * per_block, 1e-6 * eager.worst.activations);
  EXPECT_DOUBLE_EQ(eager.worst.parameters, flash.worst.parameters);
}

// --- FLOPs and time -----------------------------------------------------------------------------

TEST(FlashFlops, BackwardExecutesTwoAndAHalfTimesItsForward) {
  const BlockEnv be("llama2-7b", "p4de.24xlarge");
  for (int s : {512, 4096}) {
    const AttentionFlops f = attention_flops(be.env(AttentionKind::flash, 1, s, 2));
    EXPECT_DOUBLE_EQ(f.executed_backward, 2.5 * f.executed_forward);
    // Model FLOPs stay the conventional count, the same as eager's (MFU does not move).
    const AttentionFlops e = attention_flops(be.env(AttentionKind::eager, 1, s, 2));
    const double conventional = 4.0 * 2 * 32 * double(s) * s * 128;  // 4·b·a·s²·d
    EXPECT_DOUBLE_EQ(f.model_forward, conventional);
    EXPECT_DOUBLE_EQ(f.model_backward, 2 * conventional);
    EXPECT_DOUBLE_EQ(e.model_forward, f.model_forward);
    EXPECT_DOUBLE_EQ(e.model_backward, f.model_backward);
    EXPECT_DOUBLE_EQ(e.executed_forward, e.model_forward);
    EXPECT_DOUBLE_EQ(e.executed_backward, e.model_backward);
  }
}

TEST(FlashFlops, CausalExecutesAboutHalfOfNonCausal) {
  BlockEnv decoder("llama2-7b", "p4de.24xlarge");
  BlockEnv encoder("llama2-7b", "p4de.24xlarge");
  encoder.m.kind = ModelKind::encoder;  // same shapes, bidirectional
  const AttentionFlops causal = attention_flops(decoder.env(AttentionKind::flash, 1, 2048, 1));
  const AttentionFlops full = attention_flops(encoder.env(AttentionKind::flash, 1, 2048, 1));
  EXPECT_DOUBLE_EQ(causal.executed_forward, 0.5 * full.executed_forward);
  EXPECT_DOUBLE_EQ(causal.executed_backward, 0.5 * full.executed_backward);
  EXPECT_DOUBLE_EQ(full.executed_forward, full.model_forward);
  EXPECT_DOUBLE_EQ(causal.model_forward, full.model_forward);  // model FLOPs: the full count for both
  // BERT is an encoder: its flash kernel executes the full count.
  const BlockEnv bert("bert-large", "p4de.24xlarge");
  const AttentionFlops bf = attention_flops(bert.env(AttentionKind::flash, 1, 512, 8));
  EXPECT_DOUBLE_EQ(bf.executed_forward, bf.model_forward);
}

TEST(FlashFlops, MfuKeepsTheConventionalCountHfuAddsTheKernelRecompute) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 8, 2048);
  cfg.attention = AttentionKind::eager;
  const Prediction eager = run(m, c, cfg);
  cfg.attention = AttentionKind::flash;
  const Prediction flash = run(m, c, cfg);
  EXPECT_DOUBLE_EQ(flash.model_flops_per_step, eager.model_flops_per_step);
  // The fused backward recomputes S = Q K^T: 2·b·a·s²·d per layer and micro-batch (8 per step here).
  const double recomputed = 8 * 32 * 2.0 * 1 * 32 * 2048.0 * 2048 * 128;
  EXPECT_NEAR(flash.hardware_flops_per_step - eager.hardware_flops_per_step, recomputed,
              1e-9 * flash.hardware_flops_per_step);
  EXPECT_LT(flash.time.step_s, eager.time.step_s);  // no s x s traffic, half the work when causal
}

TEST(FlashTime, UsesTheProfileCurveOrTheGemmFallback) {
  // A100 (curve): compute-bound at s = 4096, head dim 128, causal.
  const BlockEnv a100("llama2-7b", "p4de.24xlarge");
  const CostEnv env = a100.env(AttentionKind::flash, 1, 4096, 1);
  const AttentionFlops f = attention_flops(env);
  const auto& dev = a100.c.hardware.device;
  ASSERT_FALSE(dev.flash_attention.empty());
  const AttentionTime t = flash_attention_time(env);
  EXPECT_NEAR(t.forward_s,
              f.executed_forward / (312e12 * dev.flash_attention.at(true, 128, 4096, false)) + dev.kernel_launch_s,
              1e-12);
  EXPECT_NEAR(t.backward_s,
              f.executed_backward / (312e12 * dev.flash_attention.at(true, 128, 4096, true)) + dev.kernel_launch_s,
              1e-12);
  // Trainium (no curve): the GEMM curve at the size of one batched GEMM as executed (half, causal).
  const BlockEnv trn("llama2-7b", "trn1.32xlarge");
  const CostEnv te = trn.env(AttentionKind::flash, 1, 4096, 1);
  ASSERT_TRUE(trn.c.hardware.device.flash_attention.empty());
  const AttentionFlops tf = attention_flops(te);
  const double gemm = 2.0 * 32 * 4096.0 * 4096 * 128 * 0.5;
  const double eff = te.gemm_curve->at(gemm);
  const AttentionTime tt = flash_attention_time(te);
  const auto& tdev = trn.c.hardware.device;
  EXPECT_NEAR(tt.forward_s, tf.executed_forward / (te.peak_flops * eff) + tdev.kernel_launch_s, 1e-12);
  EXPECT_NEAR(tt.backward_s, tf.executed_backward / (te.peak_flops * eff) + tdev.kernel_launch_s, 1e-12);
}

TEST(FlashTime, MeasuredAttentionGemmCostsApplyToEagerOnly) {
  // A measured-style profile: the attention GEMMs cost 1 s per FLOP (absurd on purpose).
  nlohmann::json j = to_json(load_hardware("p4de.24xlarge"));
  const ClusterSpec plain{hardware_from_json(j, "datasheet"), 1, 0};
  j["device"]["op_costs"]["attention_gemms"]["bf16"] = {
      {"forward_seconds_per_element_by_elements", {{1.0, 1.0}, {1e15, 1.0}}},
      {"backward_seconds_per_element_by_elements", {{1.0, 1.0}, {1e15, 1.0}}}};
  const ClusterSpec c{hardware_from_json(j, "measured"), 1, 0};
  const ModelSpec m = load_model("tiny-llama");
  auto linears = m.block_linears();
  std::vector<char> mask(linears.size(), 0);
  ParallelConfig cfg;
  cfg.seq_len = 256;
  cfg.attention = AttentionKind::flash;
  const PartCost flash_measured = block_cost(make_cost_env(m, c, cfg, linears, mask, BlockGroups{}));
  const PartCost flash_plain = block_cost(make_cost_env(m, plain, cfg, linears, mask, BlockGroups{}));
  EXPECT_DOUBLE_EQ(flash_measured.forward_s, flash_plain.forward_s);
  cfg.attention = AttentionKind::eager;
  const PartCost eager_measured = block_cost(make_cost_env(m, c, cfg, linears, mask, BlockGroups{}));
  EXPECT_GT(eager_measured.forward_s, 1.0);
}

TEST(FlashTime, SelectiveRecomputeIsANoOpUnderFlash) {
  const BlockEnv be("llama2-7b", "p4de.24xlarge");
  const PartCost none = block_cost(be.env(AttentionKind::flash, 1, 2048, 1, Recompute::none));
  const PartCost sel = block_cost(be.env(AttentionKind::flash, 1, 2048, 1, Recompute::selective));
  EXPECT_DOUBLE_EQ(sel.recompute_s, 0.0);
  EXPECT_DOUBLE_EQ(sel.recompute_flops, none.recompute_flops);
  EXPECT_DOUBLE_EQ(sel.stored_activation_bytes, none.stored_activation_bytes);
  const PartCost eager_sel = block_cost(be.env(AttentionKind::eager, 1, 2048, 1, Recompute::selective));
  EXPECT_GT(eager_sel.recompute_s, 0.0);
  // Whole model: selective = none; full still trades memory for time.
  const ClusterSpec c = cluster("p4de.24xlarge", 1);
  ParallelConfig cfg = config(c, 2, 1, 1, 2, 32, 4096);
  const Prediction p_none = run(be.m, c, cfg);
  cfg.recompute = Recompute::selective;
  const Prediction p_sel = run(be.m, c, cfg);
  cfg.recompute = Recompute::full;
  const Prediction p_full = run(be.m, c, cfg);
  EXPECT_DOUBLE_EQ(p_sel.worst.activations, p_none.worst.activations);
  EXPECT_DOUBLE_EQ(p_sel.time.step_s, p_none.time.step_s);
  EXPECT_LT(p_full.worst.activations, p_none.worst.activations);
  EXPECT_GT(p_full.time.step_s, p_none.time.step_s);
  EXPECT_DOUBLE_EQ(p_full.model_flops_per_step, p_none.model_flops_per_step);
}

// --- configuration JSON -------------------------------------------------------------------------

TEST(AttentionConfig, JsonRoundTripKeepsTheKindAndDefaultsToFlash) {
  ParallelConfig cfg;
  EXPECT_EQ(cfg.attention, AttentionKind::flash);
  for (AttentionKind k : {AttentionKind::flash, AttentionKind::flash1, AttentionKind::eager}) {
    cfg.attention = k;
    const nlohmann::json j = to_json(cfg);
    EXPECT_EQ(j["attention"], to_string(k));
    EXPECT_EQ(config_from_json(j, "plan.json").attention, k);
  }
  nlohmann::json old = to_json(cfg);
  old.erase("attention");  // a plan written before attention kinds
  EXPECT_EQ(config_from_json(old, "plan.json").attention, AttentionKind::flash);
  old["attention"] = "sdpa";
  try {
    (void)config_from_json(old, "plan.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("plan.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("config.attention"), std::string::npos) << msg;
    EXPECT_NE(msg.find("flash or flash1 or eager"), std::string::npos) << msg;
  }
  EXPECT_EQ(attention_kind_from_string("eager"), AttentionKind::eager);
  EXPECT_FALSE(attention_kind_from_string("Flash").has_value());
}

// --- profile curve ------------------------------------------------------------------------------

TEST(FlashProfile, BuiltinCurvesLoadAndRoundTrip) {
  for (const char* name : {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "g5.48xlarge"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = load_hardware(name);
    ASSERT_FALSE(hw.device.flash_attention.empty());
    const nlohmann::json j = to_json(hw);
    ASSERT_TRUE(j["device"].contains("flash_attention_efficiency_by_seq_len"));
    const HardwareProfile back = hardware_from_json(j, "embedded");
    const auto& a = hw.device.flash_attention;
    const auto& b = back.device.flash_attention;
    for (int mask = 0; mask < 2; ++mask) {
      ASSERT_EQ(a.by_mask[mask].size(), b.by_mask[mask].size());
      for (std::size_t i = 0; i < a.by_mask[mask].size(); ++i) {
        EXPECT_EQ(a.by_mask[mask][i].head_dim, b.by_mask[mask][i].head_dim);
        EXPECT_EQ(a.by_mask[mask][i].forward.efficiency, b.by_mask[mask][i].forward.efficiency);
        EXPECT_EQ(a.by_mask[mask][i].backward.efficiency, b.by_mask[mask][i].backward.efficiency);
        ASSERT_EQ(a.by_mask[mask][i].forward.log10_x.size(), b.by_mask[mask][i].forward.log10_x.size());
        for (std::size_t k = 0; k < a.by_mask[mask][i].forward.log10_x.size(); ++k)
          EXPECT_NEAR(a.by_mask[mask][i].forward.log10_x[k], b.by_mask[mask][i].forward.log10_x[k], 1e-12);
      }
    }
  }
  for (const char* name : {"trn1.32xlarge", "gaudi2-hls2", "local-cpu-2core"}) {
    const HardwareProfile hw = load_hardware(name);
    EXPECT_TRUE(hw.device.flash_attention.empty()) << name;
    EXPECT_FALSE(to_json(hw)["device"].contains("flash_attention_efficiency_by_seq_len")) << name;
  }
}

nlohmann::json profile_with(const nlohmann::json& curves) {
  nlohmann::json j = to_json(load_hardware("trn1.32xlarge"));
  j["device"]["flash_attention_efficiency_by_seq_len"] = curves;
  return j;
}

TEST(FlashProfile, LookupInterpolatesHeadDimClampsAndFallsBackOnTheOtherMask) {
  const nlohmann::json curves = {
      {"non_causal",
       {{"head_dim_128", {{"forward", {{512, 0.6}, {8192, 0.8}}}, {"backward", {{512, 0.5}, {8192, 0.7}}}}},
        {"head_dim_64", {{"forward", {{512, 0.4}, {8192, 0.6}}}, {"backward", {{512, 0.3}, {8192, 0.5}}}}}}}};
  const HardwareProfile hw = hardware_from_json(profile_with(curves), "custom.json");
  const FlashAttentionCurves& c = hw.device.flash_attention;
  ASSERT_EQ(c.by_mask[0].size(), 2u);
  EXPECT_EQ(c.by_mask[0][0].head_dim, 64);  // sorted by head dim
  EXPECT_DOUBLE_EQ(c.at(false, 64, 512, false), 0.4);
  EXPECT_DOUBLE_EQ(c.at(false, 128, 8192, true), 0.7);
  EXPECT_NEAR(c.at(false, 96, 512, false), 0.5, 1e-12);     // halfway between head dims
  EXPECT_NEAR(c.at(false, 256, 512, false), 0.6, 1e-12);    // clamped above
  EXPECT_NEAR(c.at(false, 32, 8192, true), 0.5, 1e-12);     // clamped below
  EXPECT_NEAR(c.at(false, 64, 2048, false), 0.5, 1e-12);    // log-linear in the sequence length
  EXPECT_NEAR(c.at(false, 64, 100000, false), 0.6, 1e-12);  // clamped in the sequence length
  EXPECT_DOUBLE_EQ(c.at(true, 64, 512, false), 0.4);        // no causal curves: the other mask's
}

TEST(FlashProfile, BadCurvesNameTheFieldAndWhatWasExpected) {
  struct Bad {
    nlohmann::json curves;
    std::string field, expected;
  };
  const nlohmann::json ok = {{"forward", {{512, 0.5}}}, {"backward", {{512, 0.4}}}};
  const std::vector<Bad> cases = {
      {{{"sideways", {{"head_dim_64", ok}}}}, "flash_attention_efficiency_by_seq_len.sideways", "causal or non_causal"},
      {{{"causal", {{"hd64", ok}}}}, "causal.hd64", "head_dim_<N>"},
      {{{"causal", {{"head_dim_64", {{"forward", {{512, 1.5}}}, {"backward", {{512, 0.4}}}}}}}},
       "head_dim_64.forward",
       "(0, 1]"},
      {{{"causal", {{"head_dim_64", {{"forward", {{512, 0.5}}}}}}}}, "head_dim_64.backward", ""},
      {{{"causal", {{"head_dim_64", {{"forward", {{2048, 0.5}, {512, 0.6}}}, {"backward", {{512, 0.4}}}}}}}},
       "head_dim_64.forward",
       "ascending"},
      {nlohmann::json::array(), "flash_attention_efficiency_by_seq_len", "causal"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.curves.dump());
    try {
      (void)hardware_from_json(profile_with(bad.curves), "custom.json");
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("custom.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad.field), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad.expected), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace attention_kinds_test
}  // namespace shardplan::simulator
