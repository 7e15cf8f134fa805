// Recompute policies, each block's stored activations against a closed form derived here from the
// card's shapes: none, Megatron's selective, full, full on the first k blocks of a chunk or on every
// N-th block of a pipeline rank, and torchtitan's per-op policy (op_sac); a Llama-like card
// (llama3.1-8b: SwiGLU, GQA, no biases, no dropout) and a GPT-like one (gpt3-175b: GELU, biased
// linears, fused qkv, dropout), eager and flash attention, tp 1 and 8, with and without SP. Then
// the order of their recompute work, the counting of recomputed blocks, the checks and the JSON.
#include <gtest/gtest.h>

#include <string>

#include "simulator/errors.hpp"
#include "simulator/op_sac.hpp"
#include "simulator/prediction_json.hpp"
#include "support/block_env.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace recompute_policies_test {  // named, not anonymous: the files share a unity-build unit

using testing::BlockEnv;
using testing::cluster;
using testing::config;
using testing::run;

// One block's shapes on one tp rank (bf16: e = 2 bytes): M = s*b tokens, rep = 1/t with SP.
struct Shape {
  double e = 2, s = 0, b = 0, M = 0, h = 0, a = 0, g = 0, d = 0, f = 0, t = 1, rep = 1;
  bool swiglu = false, drop = false, hdrop = false, sp = false;
};

Shape shape_of(const ModelSpec& m, double s, double b, int tp, bool sp) {
  Shape x;
  x.s = s, x.b = b, x.M = s * b, x.h = double(m.hidden), x.a = double(m.num_heads), x.g = double(m.num_kv_heads);
  x.d = double(m.head_dim), x.f = double(m.ffn_hidden), x.t = tp, x.rep = sp ? 1.0 / tp : 1.0, x.sp = sp;
  x.swiglu = m.ffn_kind == FfnKind::swiglu, x.drop = m.attention_dropout > 0, x.hdrop = m.hidden_dropout > 0;
  return x;
}

double scores(const Shape& x) { return x.b * x.a / x.t * x.s * x.s; }
double lse(const Shape& x) { return 4 * x.b * x.a / x.t * x.s; }  // fp32 log-sum-exp per query row

// No recompute, op by op (Korthikanti et al. 2022, §4.1, generalised to GQA and SwiGLU): the two
// norms' inputs and outputs (x rep), q and k for Q K^T, v for P V, O for the output projection,
// one dropout mask per residual; the MLP's SwiGLU gate, up, silu(gate) and product, or GELU's input
// and output; eager: the softmax output and attention dropout's mask and output (s x s each);
// flash: O and the log-sum-exp instead (Dao 2023, §3.1.1).
double none_bytes(const Shape& x, bool flash) {
  double v = 4 * x.e * x.M * x.h * x.rep + (x.hdrop ? 2 * x.M * x.h * x.rep : 0.0);
  v += x.e * x.M * (x.a * x.d + x.g * x.d + x.g * x.d + x.a * x.d) / x.t;
  v += (x.swiglu ? 4 : 2) * x.e * x.M * x.f / x.t;
  if (flash) return v + lse(x);
  return v + x.e * scores(x) + (x.drop ? (1 + x.e) * scores(x) : 0.0);
}

// Megatron's selective recompute drops the s x s tensors (§5); flash stores none.
double selective_bytes(const Shape& x, bool flash) {
  return flash ? none_bytes(x, true) : none_bytes(x, false) - (x.e + (x.drop ? 1 + x.e : 0.0)) * scores(x);
}

double full_bytes(const Shape& x) { return x.e * x.M * x.h * x.rep; }  // the block's input

// torchtitan's per-op policy (activation_checkpoint.py:98-122 @73a0e697; op_sac.hpp): the block's
// input; of the bias-free linears (aten.mm) the 1st, 3rd, 5th, ... outputs, in the order the block
// runs them (llama3/model/model.py:251, 343: wq, wk, wv, wo, w1, w3, w2: kept wq, wv, w1 and w2's
// (M, h) partial sum); biased linears run aten.addmm, not on the save list (Linear.cpp:94-110 @
// 81735ee6): the GPT card keeps none. Flash: SDPA's O and log-sum-exp. SP: the two reduce-scatters'
// (M/t, h) outputs. Eager attention (bmm, softmax, dropout) and every pointwise op: nothing.
double op_sac_bytes(const Shape& x, bool flash, bool gpt) {
  double v = x.e * x.M * x.h * x.rep;
  if (!gpt) v += x.e * x.M * (x.a * x.d / x.t + x.g * x.d / x.t + x.f / x.t + x.h);
  if (flash) v += x.e * x.M * x.a * x.d / x.t + lse(x);
  if (x.sp && x.t > 1) v += 2 * x.e * x.M * x.h / x.t;
  return v;
}

struct Card {
  const char* model;
  bool gpt;
};

struct Layout {
  int tp;
  bool sp;
};

ParallelConfig block_config(int tp, bool sp, AttentionKind kind, Recompute r, int s, int b) {
  ParallelConfig cfg;
  cfg.tp = tp, cfg.sequence_parallel = sp, cfg.attention = kind, cfg.recompute = r;
  cfg.seq_len = s, cfg.micro_batch_size = b;
  return cfg;
}

class PolicyBytes : public ::testing::TestWithParam<Card> {};

TEST_P(PolicyBytes, EachPolicyMatchesItsClosedForm) {
  const BlockEnv be(GetParam().model, "p5.48xlarge");
  ASSERT_EQ(GetParam().gpt, be.m.ffn_kind == FfnKind::gelu);
  for (const Layout l : {Layout{1, false}, Layout{8, false}, Layout{8, true}})
    for (const AttentionKind kind : {AttentionKind::eager, AttentionKind::flash})
      for (const int b : {1, 2}) {
        const bool flash = kind == AttentionKind::flash;
        const Shape x = shape_of(be.m, 2048, b, l.tp, l.sp);
        SCOPED_TRACE(std::string(GetParam().model) + " tp=" + std::to_string(l.tp) + (l.sp ? " sp " : " ") +
                     to_string(kind) + " b=" + std::to_string(b));
        auto bytes = [&](Recompute r) { return be.bytes(block_config(l.tp, l.sp, kind, r, 2048, b)); };
        const double none = none_bytes(x, flash);
        EXPECT_NEAR(bytes(Recompute::none), none, 1e-12 * none);
        EXPECT_NEAR(bytes(Recompute::selective), selective_bytes(x, flash), 1e-12 * none);
        EXPECT_NEAR(bytes(Recompute::full), full_bytes(x), 1e-12 * none);
        const double op = op_sac_bytes(x, flash, GetParam().gpt);
        EXPECT_NEAR(bytes(Recompute::op_sac), op, 1e-12 * none);
        EXPECT_LT(op, none);
        // The GPT card under eager attention without SP keeps no op output: only the input, as full.
        if (GetParam().gpt && !flash && !l.sp) EXPECT_DOUBLE_EQ(op, full_bytes(x));
        else EXPECT_GT(op, full_bytes(x));
      }
}

INSTANTIATE_TEST_SUITE_P(Cards, PolicyBytes, ::testing::Values(Card{"llama3.1-8b", false}, Card{"gpt3-175b", true}));

// GPT-2 and NeoX blocks have biased linears too: op_sac keeps no linear output there; Qwen2-style
// q/k/v biases leave o_proj, gate, up, down as the mm sequence (kept: o_proj and up).
TEST(OpSac, KeptLinearsFollowTheMmCountOverBiasFreeLinears) {
  const ModelSpec llama = load_model("llama3.1-8b");
  EXPECT_EQ(op_sac_kept_linears(llama.block_linears()), (std::vector<char>{1, 0, 1, 0, 1, 0, 1}));
  for (const char* gpt : {"gpt2", "gpt-neox-20b"})
    for (char k : op_sac_kept_linears(load_model(gpt).block_linears())) EXPECT_EQ(k, 0) << gpt;
  ModelSpec qkv_bias = llama;
  qkv_bias.qkv_bias = true;
  EXPECT_EQ(op_sac_kept_linears(qkv_bias.block_linears()), (std::vector<char>{0, 0, 0, 1, 0, 1, 0}));
}

// Recompute work: full reruns the whole forward, op_sac all but the kept matmuls and the SDPA
// kernel, selective under flash nothing. The FLOPs op_sac saves against full are the kept GEMMs'
// 2·M·d_in·d_out and flash's Q K^T and P V (4·b·(a/t)·s²·d).
TEST(OpSac, RecomputesLessThanFullAndMoreThanSelective) {
  for (const Card card : {Card{"llama3.1-8b", false}, Card{"gpt3-175b", true}})
    for (const Layout l : {Layout{1, false}, Layout{8, true}}) {
      SCOPED_TRACE(std::string(card.model) + " tp=" + std::to_string(l.tp));
      const BlockEnv be(card.model, "p5.48xlarge");
      auto cost = [&](Recompute r) {
        return block_cost(be.env(block_config(l.tp, l.sp, AttentionKind::flash, r, 4096, 1)));
      };
      const PartCost full = cost(Recompute::full), op = cost(Recompute::op_sac), sel = cost(Recompute::selective);
      EXPECT_GT(full.recompute_s, op.recompute_s);
      EXPECT_GT(op.recompute_s, 0.0);
      EXPECT_DOUBLE_EQ(sel.recompute_s, 0.0);
      const Shape x = shape_of(be.m, 4096, 1, l.tp, l.sp);
      double kept = 4 * x.b * x.a / x.t * x.s * x.s * x.d;                             // the flash kernel's forward
      if (!card.gpt) kept += 2 * x.M * x.h * (x.a * x.d + x.g * x.d + 2 * x.f) / x.t;  // wq, wv, w1, w2
      EXPECT_NEAR(full.recompute_flops - op.recompute_flops, kept, 1e-9 * kept);
    }
}

// PyTorch's non-reentrant checkpoint stops recomputing once the block's last saved tensor is back
// (FrameworkTerms::recompute_stops_early): the MLP's down projection, the block's last linear, does
// not rerun. Its forward FLOPs, 2·M·(f/t)·h, are exactly what the recompute loses; the forward, the
// backward and what is stored stay as they are.
TEST(EarlyStop, SkipsTheLastLinearAndNothingElse) {
  for (const Card card : {Card{"llama3.1-8b", false}, Card{"gpt3-175b", true}})
    for (const Layout l : {Layout{1, false}, Layout{8, false}, Layout{8, true}}) {
      SCOPED_TRACE(std::string(card.model) + " tp=" + std::to_string(l.tp) + (l.sp ? " sp" : ""));
      const BlockEnv be(card.model, "p5.48xlarge");
      ParallelConfig cfg = block_config(l.tp, l.sp, AttentionKind::flash, Recompute::full, 4096, 2);
      const PartCost full = block_cost(be.env(cfg));
      cfg.framework.recompute_stops_early = true;
      const PartCost early = block_cost(be.env(cfg));
      const Shape x = shape_of(be.m, 4096, 2, l.tp, l.sp);
      const double down = 2 * x.M * x.f / x.t * x.h;
      EXPECT_NEAR(full.recompute_flops - early.recompute_flops, down, 1e-9 * down);
      EXPECT_GT(early.recompute_s, 0.5 * full.recompute_s);
      EXPECT_LT(early.recompute_s, full.recompute_s);
      EXPECT_DOUBLE_EQ(early.forward_s, full.forward_s);
      EXPECT_DOUBLE_EQ(early.backward_s, full.backward_s);
      EXPECT_DOUBLE_EQ(early.stored_activation_bytes, full.stored_activation_bytes);
    }
}

// What does not change: no recompute, an MoE block (its last saver is the expert combine), and a
// LoRA-adapted last linear (the adapter saves its inputs after the base GEMM ran).
TEST(EarlyStop, MoeBlocksLoraOnTheLastLinearAndNoRecomputeRerunAll) {
  auto both = [](const BlockEnv& be, ParallelConfig cfg) {
    const PartCost a = block_cost(be.env(cfg));
    cfg.framework.recompute_stops_early = true;
    return std::pair{a, block_cost(be.env(cfg))};
  };
  const BlockEnv llama("llama3.1-8b", "p5.48xlarge");
  const auto [none, none_early] = both(llama, block_config(1, false, AttentionKind::flash, Recompute::none, 4096, 1));
  EXPECT_DOUBLE_EQ(none_early.recompute_s, none.recompute_s);

  BlockEnv lora("llama3.1-8b", "p5.48xlarge");
  lora.mask.back() = 1;  // the down projection adapted
  ParallelConfig lcfg = block_config(1, false, AttentionKind::flash, Recompute::full, 4096, 1);
  lcfg.lora.rank = 16;
  const auto [adapted, adapted_early] = both(lora, lcfg);
  EXPECT_DOUBLE_EQ(adapted_early.recompute_s, adapted.recompute_s);
  lora.mask.assign(lora.mask.size(), 0);
  lora.mask.front() = 1;  // only q adapted: the frozen down projection saves its weight and stops
  const auto [front, front_early] = both(lora, lcfg);
  EXPECT_LT(front_early.recompute_s, front.recompute_s);

  const ModelSpec moe = load_model("mixtral-8x7b");
  ParallelConfig cfg = block_config(1, false, AttentionKind::flash, Recompute::full, 4096, 1);
  const auto experts = moe.expert_linears();
  std::vector<char> expert_mask(experts.size(), 0);
  const BlockEnv mb("mixtral-8x7b", "p5.48xlarge");
  auto moe_cost = [&](bool early) {
    cfg.framework.recompute_stops_early = early;
    CostEnv env = mb.env(cfg);
    env.moe = true;
    env.expert_linears = &experts;
    env.expert_lora_mask = &expert_mask;
    return block_cost(env);
  };
  EXPECT_DOUBLE_EQ(moe_cost(true).recompute_s, moe_cost(false).recompute_s);
}

// A whole model: op_sac between none and full in memory and in step time.
TEST(OpSac, WholeModelSitsBetweenNoneAndFull) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 2, 1, 1, 2, 32, 8192);
  cfg.sequence_parallel = true;
  auto with = [&](Recompute r) {
    cfg.recompute = r;
    return run(m, c, cfg);
  };
  const Prediction none = with(Recompute::none), op = with(Recompute::op_sac), full = with(Recompute::full);
  EXPECT_LT(op.worst.activations, none.worst.activations);
  EXPECT_GT(op.worst.activations, full.worst.activations);
  EXPECT_GT(op.time.recompute_s, 0.0);
  EXPECT_LT(op.time.recompute_s, full.time.recompute_s);
  EXPECT_LT(op.hardware_flops_per_step, full.hardware_flops_per_step);
  EXPECT_DOUBLE_EQ(op.model_flops_per_step, none.model_flops_per_step);
}

// --- which blocks a partial full recompute takes ------------------------------------------------

// The blocks of chunk `ch` on stage `st` without embedding and head: recomputed x full + the rest x none.
double chunk_blocks_bytes(const Evaluator& ev, const ParallelConfig& cfg, int ch, int st) {
  const ConfigContext ctx(ev.context(), cfg);
  ChunkShape sh = chunk_shape(ev.model(), cfg, ch, st);
  sh.embedding = sh.head = false;
  return chunk_time(ctx, sh).stored_bytes;
}

// llama3.1-8b, pp 2 x 2 virtual stages: chunks of 8 blocks; rank 0 holds chunks 0 and 2 of the
// model, its blocks numbered 1-8 and 9-16. torchtitan's every-N-th counter runs over the rank's
// blocks (activation_checkpoint.py:24-49; pipeline_parallel.py:136-141, 451-473); Megatron's
// first k counts per chunk.
TEST(PartialRecompute, FirstKAndEveryNthBlocksPerChunkMatchTheirClosedForms) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Evaluator ev(m, c);
  for (const AttentionKind kind : {AttentionKind::eager, AttentionKind::flash}) {
    ParallelConfig cfg = config(c, 1, 2, 1, 1, 8, 2048);
    cfg.schedule = PipelineSchedule::interleaved, cfg.virtual_stages = 2, cfg.attention = kind;
    cfg.recompute = Recompute::full;
    const Shape x = shape_of(m, 2048, 1, 1, false);
    const double none = none_bytes(x, kind == AttentionKind::flash), full = full_bytes(x);
    for (const int every : {2, 3, 5, 16, 17}) {
      ParallelConfig e = cfg;
      e.recompute_every = every;
      validate_config(m, c, e);
      for (int st = 0; st < 2; ++st)
        for (int ch = 0; ch < 2; ++ch) {
          int recomputed = 0;  // the rank's blocks 8ch+1 .. 8ch+8 that are multiples of N
          for (int i = 8 * ch + 1; i <= 8 * ch + 8; ++i) recomputed += i % every == 0;
          SCOPED_TRACE("every " + std::to_string(every) + " chunk " + std::to_string(ch) + " stage " +
                       std::to_string(st));
          EXPECT_EQ(chunk_shape(m, e, ch, st).recomputed, recomputed);
          const double want = recomputed * full + (8 - recomputed) * none;
          EXPECT_NEAR(chunk_blocks_bytes(ev, e, ch, st), want, 1e-12 * want);
        }
    }
    for (const int k : {1, 5, 8}) {
      ParallelConfig first = cfg;
      first.recompute_num_layers = k;
      validate_config(m, c, first);
      const double want = k * full + (8 - k) * none;
      for (int ch = 0; ch < 2; ++ch) EXPECT_NEAR(chunk_blocks_bytes(ev, first, ch, 1), want, 1e-12 * want) << k;
    }
  }
}

TEST(PartialRecompute, EveryFirstBlockIsFullRecompute) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 2, 1, 1, 8, 2048);
  cfg.recompute = Recompute::full;
  const Prediction full = run(m, c, cfg);
  cfg.recompute_every = 1;
  const Prediction every1 = run(m, c, cfg);
  EXPECT_DOUBLE_EQ(every1.worst.total(), full.worst.total());
  EXPECT_DOUBLE_EQ(every1.time.step_s, full.time.step_s);
  cfg.recompute_every = 4;  // 4 of each stage's 16 blocks
  const Prediction every4 = run(m, c, cfg);
  cfg.recompute_every = 0, cfg.recompute_num_layers = 4;
  const Prediction first4 = run(m, c, cfg);
  EXPECT_NEAR(every4.time.recompute_s, 0.25 * full.time.recompute_s, 1e-9 * full.time.recompute_s);
  EXPECT_DOUBLE_EQ(every4.worst.activations, first4.worst.activations);
  EXPECT_DOUBLE_EQ(every4.hardware_flops_per_step, first4.hardware_flops_per_step);
}

// --- checks and JSON ----------------------------------------------------------------------------

std::string message(const ModelSpec& m, const ClusterSpec& c, ParallelConfig cfg) {
  try {
    validate_config(m, c, cfg);
  } catch (const InputError& e) { return e.what(); }
  return "";
}

TEST(RecomputeChecks, OneLineNamingTheFlag) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const ParallelConfig base = config(c, 1, 1, 1, 1, 8, 4096);
  auto with = [&](auto edit) {
    ParallelConfig x = base;
    edit(x);
    const std::string msg = message(m, c, x);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  };
  auto has = [](const std::string& msg, const char* part) { return msg.find(part) != std::string::npos; };
  EXPECT_TRUE(has(with([](ParallelConfig& x) { x.recompute_every = 2; }), "--recompute-every: needs --recompute full"));
  EXPECT_TRUE(has(with([](ParallelConfig& x) { x.recompute = Recompute::full, x.recompute_every = -1; }),
                  "--recompute-every: expected 0"));
  EXPECT_TRUE(has(
      with([](ParallelConfig& x) { x.recompute = Recompute::full, x.recompute_every = 2, x.recompute_num_layers = 4; }),
      "--recompute-every: expected 0 with --recompute-num-layers"));
  EXPECT_EQ(with([](ParallelConfig& x) { x.recompute = Recompute::full, x.recompute_every = 3; }), "");
  EXPECT_EQ(with([](ParallelConfig& x) { x.recompute = Recompute::op_sac; }), "");
  EXPECT_TRUE(has(with([](ParallelConfig& x) { x.recompute = Recompute::op_sac, x.fusion = Fusion::megatron; }),
                  "--recompute: op_sac"));
  EXPECT_TRUE(has(with([](ParallelConfig& x) { x.recompute = Recompute::op_sac, x.fp8 = Fp8Recipe::tensorwise; }),
                  "without --fp8"));
  EXPECT_TRUE(has(with([](ParallelConfig& x) { x.recompute = Recompute::op_sac, x.cp = 2, x.dp = 4; }), "--cp 1"));
  const ModelSpec moe = load_model("mixtral-8x7b");
  ParallelConfig x = base;
  x.recompute = Recompute::op_sac;
  EXPECT_TRUE(has(message(moe, c, x), "not MoE or MLA models"));
}

TEST(RecomputeJson, OpSacAndEveryNthRoundTrip) {
  ParallelConfig cfg;
  cfg.recompute = Recompute::op_sac;
  nlohmann::json j = to_json(cfg);
  EXPECT_EQ(j.at("recompute"), "op_sac");
  EXPECT_FALSE(j.contains("recompute_every"));  // unused: not written
  EXPECT_EQ(config_from_json(j, "plan.json").recompute, Recompute::op_sac);
  cfg.recompute = Recompute::full, cfg.recompute_every = 3;
  j = to_json(cfg);
  EXPECT_EQ(j.at("recompute_every"), 3);
  const ParallelConfig back = config_from_json(j, "plan.json");
  EXPECT_EQ(back.recompute, Recompute::full);
  EXPECT_EQ(back.recompute_every, 3);
  j.erase("recompute_every");  // plans written before the field
  EXPECT_EQ(config_from_json(j, "plan.json").recompute_every, 0);
}

}  // namespace recompute_policies_test
}  // namespace shardplan::simulator
