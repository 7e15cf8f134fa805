// Mixture of experts in shardrun (tiny-moe: 4 blocks, the first dense, 8 experts top-2 of width
// 256 plus a shared expert). In-process: the routed experts (sorted dispatch, grouped experts,
// index_add combine) give Hugging Face's per-expert loop's output and gradients, with and
// without top-k renormalisation, and every local expert gets a gradient even with no token.
// Under mpirun: the loss falls over 20 steps, and tp 2 with SP (the planner's MoE plans with tp
// > 1 have SP, as Megatron-Core requires), dp 2 at ZeRO 0/2/3, pp 2, ep 2 (ZeRO 0 and 3),
// ep 2 x dp 2 ZeRO-1 and ep 2 x tp 2 give the single-rank run's losses (1e-5 relative) and,
// gathered, its final weights, and report.json has their all-to-all seconds and router
// imbalance; plans shardrun does not run are refused. LoRA on the experts: adapters act as the
// merged weights, train under PEFT names while the base stays bit for bit, and ep 2 (ZeRO-3),
// tp 2 + SP and ep 2 x dp 2 give one rank's losses and adapters. Capacity: the highest-probability
// picks up to capacity stay, exactly; a factor of 1 drops tokens (ep 2 the same ones), E/k none.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "executor/model/moe_block.hpp"
#include "executor/model/transformer.hpp"
#include "formats/plan.hpp"
#include "harness.hpp"

namespace shardplan::testing {
namespace moe_test {  // named, not anonymous: the files share a unity-build unit

using executor::ExpertWeights;
using executor::MoeMlp;

constexpr int kSteps = 20;
// Adapters on the attention's q/v and on every MLP linear: the routed experts', the shared
// expert's and the dense first block's (PEFT's suffix match).
const nlohmann::json kMoeLora = {{"rank", 8},
                                 {"alpha", 16},
                                 {"dropout", 0.0},
                                 {"targets", {"q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"}}};

torch::Tensor leaf(std::vector<int64_t> shape, double scale) {
  return (torch::randn(shape, torch::kDouble) * scale).to(torch::kFloat).requires_grad_(true);
}

MoeMlp random_moe(int64_t E, int64_t k, int64_t H, int64_t F, bool renormalize) {
  MoeMlp m;
  m.num_experts = E;
  m.top_k = k;
  m.renormalize = renormalize;
  m.router = leaf({E, H}, 0.5);
  for (int64_t e = 0; e < E; ++e) m.experts.push_back({leaf({F, H}, 0.2), leaf({F, H}, 0.2), leaf({H, F}, 0.2)});
  return m;
}

// Hugging Face's loop (modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock.forward at transformers
// 00a3f9386614dde0dc41cf4e9b8d0abd3af0671d): for each expert, the (token, slot) pairs that picked it.
// `keep` (N, k), when given: picks outside it get weight 0 (token dropping).
torch::Tensor hf_reference(const MoeMlp& m, const torch::Tensor& x, const torch::Tensor& keep = {}) {
  torch::Tensor probs = torch::softmax(torch::matmul(x, m.router.t()).to(torch::kFloat), 1);
  auto [w, sel] = probs.topk(m.top_k, -1);
  if (m.renormalize) w = w / w.sum(-1, true);
  if (keep.defined()) w = w * keep.to(w.scalar_type());
  torch::Tensor out = torch::zeros_like(x);
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const auto hit = torch::where(sel == e);  // (token, slot)
    const torch::Tensor tok = hit[0], slot = hit[1];
    if (tok.numel() == 0) continue;
    const ExpertWeights& ew = m.experts[static_cast<size_t>(e)];
    const torch::Tensor xe = x.index_select(0, tok);
    const torch::Tensor h = torch::silu(torch::matmul(xe, ew.gate.t())) * torch::matmul(xe, ew.up.t());
    const torch::Tensor y = torch::matmul(h, ew.down.t()) * w.index({tok, slot}).unsqueeze(1);
    out = out.index_add(0, tok, y);
  }
  return out;
}

std::vector<torch::Tensor> grads_of(const MoeMlp& m, const torch::Tensor& x) {
  std::vector<torch::Tensor> g{x.grad().clone(), m.router.grad().clone()};
  for (const auto& e : m.experts)
    for (const auto& t : {e.gate, e.up, e.down})
      g.push_back(t.grad().defined() ? t.grad().clone() : torch::zeros_like(t));
  return g;
}

void zero_grads(const MoeMlp& m, const torch::Tensor& x) {
  for (torch::Tensor t : {x, m.router}) t.mutable_grad() = torch::Tensor();
  for (const auto& e : m.experts)
    for (torch::Tensor t : {e.gate, e.up, e.down}) t.mutable_grad() = torch::Tensor();
}

TEST(MoeRouting, SortedGroupedExpertsMatchHuggingFacesPerExpertLoop) {
  torch::manual_seed(7);
  for (const bool renormalize : {false, true}) {
    const MoeMlp m = random_moe(8, 2, 16, 24, renormalize);
    const torch::Tensor x = leaf({37, 16}, 1.0);
    const torch::Tensor upstream = torch::randn({37, 16});
    executor::MoeRoutingStats stats;
    const torch::Tensor ours = executor::moe_routed_experts(m, x, nullptr, &stats);
    (ours * upstream).sum().backward();
    const auto g_ours = grads_of(m, x);
    zero_grads(m, x);
    const torch::Tensor ref = hf_reference(m, x);
    (ref * upstream).sum().backward();
    const auto g_ref = grads_of(m, x);
    EXPECT_TRUE(torch::allclose(ours, ref, 1e-5, 1e-6)) << "renormalize " << renormalize;
    ASSERT_EQ(g_ours.size(), g_ref.size());
    for (size_t i = 0; i < g_ref.size(); ++i)
      EXPECT_TRUE(torch::allclose(g_ours[i], g_ref[i], 1e-4, 1e-5))
          << "gradient " << i << " renormalize " << renormalize;
    // The router learns through the combine weights.
    EXPECT_GT(g_ours[1].abs().sum().item<double>(), 0.0);
    EXPECT_EQ(stats.samples, 1);
    EXPECT_GE(stats.imbalance_max, 1.0);
  }
}

TEST(MoeRouting, RenormalisationChangesTheOutput) {
  torch::manual_seed(3);
  MoeMlp m = random_moe(4, 2, 8, 8, false);
  const torch::Tensor x = leaf({9, 8}, 1.0);
  const torch::Tensor plain = executor::moe_routed_experts(m, x, nullptr, nullptr);
  m.renormalize = true;
  const torch::Tensor renormed = executor::moe_routed_experts(m, x, nullptr, nullptr);
  EXPECT_FALSE(torch::allclose(plain, renormed, 1e-3, 1e-4));
}

TEST(MoeRouting, EveryLocalExpertGetsAGradientEvenWithoutTokens) {
  torch::manual_seed(11);
  MoeMlp m = random_moe(8, 1, 8, 8, false);
  // Every token prefers expert 3 by far: the other seven get no rows.
  torch::NoGradGuard no_grad;
  m.router.zero_();
  m.router[3].fill_(5.0);
  const torch::Tensor x = torch::rand({5, 8}) + 0.5;
  torch::Tensor xg = x.clone().requires_grad_(true);
  {
    at::AutoGradMode grad(true);
    executor::MoeRoutingStats stats;
    executor::moe_routed_experts(m, xg, nullptr, &stats).sum().backward();
    EXPECT_DOUBLE_EQ(stats.imbalance_max, 8.0);  // all 5 tokens on one of 8 experts: max / mean = 8
  }
  for (int64_t e = 0; e < 8; ++e) {
    ASSERT_TRUE(m.experts[static_cast<size_t>(e)].gate.grad().defined()) << "expert " << e;
    const double g = m.experts[static_cast<size_t>(e)].gate.grad().abs().sum().item<double>();
    if (e == 3) EXPECT_GT(g, 0.0);
    else EXPECT_EQ(g, 0.0) << "expert " << e;
  }
}

// Token dropping (Megatron-Core moe_utils.py apply_router_token_dropping, drop_policy "probs"):
// per expert the `capacity` highest-probability picks stay, exactly, and nothing else.
TEST(MoeCapacity, KeepsEachExpertsHighestProbabilityPicksUpToCapacityExactly) {
  torch::manual_seed(5);
  const int64_t N = 40, E = 4, k = 2;
  auto [top_p, top_e] = torch::randn({N, E}).softmax(-1).topk(k, -1);
  // get_capacity: ceil(N*k/E * factor).
  EXPECT_EQ(executor::expert_capacity(N, k, E, 1.0), 20);
  EXPECT_EQ(executor::expert_capacity(37, 2, 8, 1.0), 10);   // ceil(9.25)
  EXPECT_EQ(executor::expert_capacity(37, 2, 8, 1.25), 12);  // ceil(11.5625)
  for (const int64_t capacity : {3, 7, 20, 40}) {
    const torch::Tensor keep = executor::capacity_keep_mask(top_p, top_e, E, capacity);
    ASSERT_EQ(keep.sizes(), top_e.sizes());
    for (int64_t e = 0; e < E; ++e) {
      const torch::Tensor mine = top_e.eq(e);
      const int64_t routed = mine.sum().item<int64_t>();
      const torch::Tensor kept = keep.logical_and(mine), dropped = keep.logical_not().logical_and(mine);
      EXPECT_EQ(kept.sum().item<int64_t>(), std::min(routed, capacity)) << "expert " << e << " capacity " << capacity;
      if (dropped.any().item<bool>()) {  // every dropped pick has a lower probability than every kept one
        EXPECT_LT(top_p.masked_select(dropped).max().item<float>(), top_p.masked_select(kept).min().item<float>())
            << "expert " << e << " capacity " << capacity;
      }
    }
  }
  // A hand-made case: expert 0 picked by tokens 0..3 with 0.4, 0.9, 0.6, 0.2; capacity 2 keeps 1 and 2.
  const torch::Tensor p = torch::tensor({0.4F, 0.9F, 0.6F, 0.2F}).view({4, 1});
  const torch::Tensor e = torch::zeros({4, 1}, torch::kLong);
  const torch::Tensor keep = executor::capacity_keep_mask(p, e, 2, 2).view({-1});
  EXPECT_TRUE(torch::equal(keep, torch::tensor({false, true, true, false})));
}

// The routed experts under a capacity equal Hugging Face's loop with the dropped picks' weights
// zeroed (the residual alone carries them), gradients included; the stats count the drops.
TEST(MoeCapacity, DroppedPicksAddNothingAndAreCounted) {
  torch::manual_seed(9);
  MoeMlp m = random_moe(8, 2, 16, 24, false);
  m.capacity_factor = 1.0;
  const torch::Tensor x = leaf({37, 16}, 1.0);
  const torch::Tensor upstream = torch::randn({37, 16});
  executor::MoeRoutingStats stats;
  const torch::Tensor ours = executor::moe_routed_experts(m, x, nullptr, &stats);
  (ours * upstream).sum().backward();
  const auto g_ours = grads_of(m, x);
  zero_grads(m, x);
  // The reference: the same top-k, the picks over capacity given weight 0.
  const torch::Tensor probs = torch::softmax(torch::matmul(x, m.router.t()).to(torch::kFloat), 1);
  auto [w, sel] = probs.topk(m.top_k, -1);
  const torch::Tensor keep = executor::capacity_keep_mask(w, sel, 8, executor::expert_capacity(37, 2, 8, 1.0));
  const int64_t dropped = keep.logical_not().sum().item<int64_t>();
  ASSERT_GT(dropped, 0);  // capacity 10 for 74 picks over 8 experts: random routing overflows some
  EXPECT_EQ(stats.dropped, dropped);
  EXPECT_EQ(stats.routed, 74);
  MoeMlp ref_m = m;
  ref_m.capacity_factor = 0;
  const torch::Tensor ref = hf_reference(ref_m, x, keep);
  (ref * upstream).sum().backward();
  const auto g_ref = grads_of(m, x);
  EXPECT_TRUE(torch::allclose(ours, ref, 1e-5, 1e-6));
  for (size_t i = 0; i < g_ref.size(); ++i) EXPECT_TRUE(torch::allclose(g_ours[i], g_ref[i], 1e-4, 1e-5)) << i;
  // Each expert ran at most `capacity` rows: the busiest over the mean of what was kept.
  EXPECT_LE(stats.imbalance_max * static_cast<double>(74 - dropped) / 8.0, 10.0 + 1e-9);
}

// LoRA on the experts: the output and gradients of W + (alpha/r) B A per expert linear.
TEST(MoeLora, ExpertAdaptersActAsTheMergedWeights) {
  torch::manual_seed(13);
  MoeMlp m = random_moe(4, 2, 8, 12, true);
  const double scale = 2.0;
  for (auto& e : m.experts) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor* t : {&e.gate, &e.up, &e.down}) t->set_requires_grad(false);  // frozen base
    auto adapter = [&](int64_t out, int64_t in) {
      executor::LoraAdapter a;
      a.A = leaf({3, in}, 0.3);
      a.B = leaf({out, 3}, 0.3);
      a.scale = scale;
      return a;
    };
    e.gate_lora = adapter(12, 8);
    e.up_lora = adapter(12, 8);
    e.down_lora = adapter(8, 12);
  }
  const torch::Tensor x = leaf({23, 8}, 1.0);
  const torch::Tensor upstream = torch::randn({23, 8});
  (executor::moe_routed_experts(m, x, nullptr, nullptr) * upstream).sum().backward();
  MoeMlp merged = m;
  merged.experts = m.experts;  // the same base tensors, the adapters merged in below
  for (ExpertWeights& e : merged.experts) {
    e.gate = e.gate + scale * torch::matmul(e.gate_lora->B, e.gate_lora->A);
    e.up = e.up + scale * torch::matmul(e.up_lora->B, e.up_lora->A);
    e.down = e.down + scale * torch::matmul(e.down_lora->B, e.down_lora->A);
  }
  std::vector<torch::Tensor> ours;
  for (const auto& e : m.experts)
    for (const auto* a : {&*e.gate_lora, &*e.up_lora, &*e.down_lora}) {
      ours.push_back(a->A.grad().clone());
      ours.push_back(a->B.grad().clone());
      a->A.mutable_grad() = torch::Tensor();
      a->B.mutable_grad() = torch::Tensor();
    }
  const torch::Tensor x_grad = x.grad().clone();
  x.mutable_grad() = torch::Tensor();
  (hf_reference(merged, x) * upstream).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), x_grad, 1e-4, 1e-5));
  size_t i = 0;
  for (const auto& e : m.experts)
    for (const auto* a : {&*e.gate_lora, &*e.up_lora, &*e.down_lora}) {
      EXPECT_GT(ours[i].abs().sum().item<double>() + ours[i + 1].abs().sum().item<double>(), 0.0);
      EXPECT_TRUE(torch::allclose(ours[i++], a->A.grad(), 1e-4, 1e-5));
      EXPECT_TRUE(torch::allclose(ours[i++], a->B.grad(), 1e-4, 1e-5));
    }
  for (const auto& e : m.experts) EXPECT_FALSE(e.gate.grad().defined());  // the base stays frozen
}

// Mixtral's expert names: "w1"/"w3"/"w2" are accepted targets and adapt every expert's linear
// under PEFT's names; each ep rank builds only its own experts' adapters.
TEST(MoeLora, MixtralTargetsNameTheExpertsW1W2W3) {
  simulator::ModelSpec spec = simulator::load_model(std::string(SHARDPLAN_SOURCE_DIR) + "/models/tiny-moe.json");
  spec.family = "mixtral";
  spec.moe.shared_ffn_hidden = 0;
  spec.moe.first_dense_layers = 0;
  spec.num_layers = 1;
  const std::vector<std::string> targets{"w1", "w2", "w3"};
  EXPECT_NO_THROW(simulator::resolve_lora_targets(spec, targets));
  executor::ModelOptions mo;
  mo.lora.rank = 4;
  mo.lora.alpha = 8;
  mo.lora.targets = targets;
  std::vector<std::string> names;
  const executor::Transformer model(spec, mo);
  for (const auto& p : model.parameters())
    if (p.lora) names.push_back(p.name);
  ASSERT_EQ(names.size(), 8u * 3 * 2);  // nothing but the experts' linears
  EXPECT_EQ(names.front(), "base_model.model.model.layers.0.block_sparse_moe.experts.0.w1.lora_A.weight");
  EXPECT_EQ(names.back(), "base_model.model.model.layers.0.block_sparse_moe.experts.7.w2.lora_B.weight");
}

// --- runs of the real shardrun ------------------------------------------------------------

// The MoE settings of a test plan: one rank's defaults, then the layout's own.
nlohmann::json moe_config(nlohmann::json overrides) {
  nlohmann::json cfg = {
      {"expert_parallel", 1}, {"expert_tensor_parallel", 0}, {"context_parallel", 1}, {"moe_capacity_factor", 0}};
  for (auto& [k, v] : overrides.items()) cfg[k] = v;
  if (cfg["expert_tensor_parallel"] == 0) cfg["expert_tensor_parallel"] = cfg.value("tensor_parallel", 1);
  return cfg;
}

struct MoeLayout {
  std::string name;
  int ranks;
  nlohmann::json config;
};
std::ostream& operator<<(std::ostream& os, const MoeLayout& l) { return os << l.name; }

class MoeRuns : public ::testing::Test {
 protected:
  // One directory for both suites, so that the reference run is made once (removed at exit).
  static TempDir& dir() {
    static TempDir d("shardrun_moe");
    return d;
  }
  static std::string args(const std::string& name) {
    return "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 " + corpus_data_args(dir()) +
           " --save-final " + dir().file(name + ".safetensors");
  }
  // The single-rank run, made once.
  static const RunResult& reference() {
    static RunResult ref;
    static bool done = false;
    if (!done) {
      const std::string plan = write_plan(dir(), "ref", "tiny-moe", moe_config({}));
      ref = shardrun(1, plan, dir().file("ref"), args("ref"));
      done = true;
    }
    return ref;
  }
};

TEST_F(MoeRuns, TinyMoeLossFallsOverTwentySteps) {
  const RunResult& ref = reference();
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.5);
  // The export names the experts as Hugging Face's Qwen2-MoE does.
  const auto w = read_floats(dir().file("ref.safetensors"));
  EXPECT_TRUE(w.count("model.layers.1.mlp.gate.weight"));
  EXPECT_TRUE(w.count("model.layers.3.mlp.experts.7.down_proj.weight"));
  EXPECT_TRUE(w.count("model.layers.2.mlp.shared_expert.up_proj.weight"));
  EXPECT_TRUE(w.count("model.layers.0.mlp.gate_proj.weight"));  // the first block is dense
  EXPECT_FALSE(w.count("model.layers.0.mlp.gate.weight"));
  EXPECT_EQ(w.at("model.layers.1.mlp.experts.0.gate_proj.weight").size(), 256u * 128u);
}

class MoeEquivalence : public MoeRuns, public ::testing::WithParamInterface<MoeLayout> {};

TEST_P(MoeEquivalence, SameLossesAndFinalWeightsAsOneRank) {
  const MoeLayout& l = GetParam();
  const RunResult& ref = reference();
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const std::string plan = write_plan(dir(), l.name, "tiny-moe", moe_config(l.config));
  const RunResult run = shardrun(l.ranks, plan, dir().file(l.name), args(l.name));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  expect_same_weights(dir().file(l.name + ".safetensors"), dir().file("ref.safetensors"));
  // report.json: time in the expert all-to-alls (none without ep) and the router's imbalance.
  const auto& measured = run.report.at("measured");
  const auto& predicted = run.report.at("predicted");
  if (l.config.value("expert_parallel", 1) > 1) {
    EXPECT_GT(measured.at("a2a_seconds").get<double>(), 0.0);
    EXPECT_GT(predicted.at("a2a_seconds").get<double>(), 0.0);  // the simulator's exposed all-to-alls
  } else {  // (the prediction may hold expert-tensor gathers, which shardrun counts under tp)
    EXPECT_EQ(measured.at("a2a_seconds").get<double>(), 0.0);
    if (l.config.value("tensor_parallel", 1) == 1) { EXPECT_EQ(predicted.at("a2a_seconds").get<double>(), 0.0); }
  }
  EXPECT_GE(measured.at("router_load_imbalance").get<double>(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeEquivalence,
    ::testing::Values(
        MoeLayout{"tp2_sp", 2, {{"tensor_parallel", 2}, {"sequence_parallel", true}}},
        MoeLayout{"dp2_zero0", 2, {{"data_parallel", 2}, {"zero_stage", 0}}},
        MoeLayout{"dp2_zero2", 2, {{"data_parallel", 2}, {"zero_stage", 2}}},
        MoeLayout{"dp2_zero3", 2, {{"data_parallel", 2}, {"zero_stage", 3}}},
        MoeLayout{"pp2", 2, {{"pipeline_parallel", 2}, {"pipeline_schedule", "1f1b"}}},
        MoeLayout{"ep2_zero0", 2, {{"data_parallel", 2}, {"expert_parallel", 2}, {"zero_stage", 0}}},
        MoeLayout{"ep2_zero3", 2, {{"data_parallel", 2}, {"expert_parallel", 2}, {"zero_stage", 3}}},
        MoeLayout{"ep2_dp2_zero1", 4, {{"data_parallel", 4}, {"expert_parallel", 2}, {"zero_stage", 1}}},
        MoeLayout{
            "ep2_dp2_pp2",
            4,
            {{"pipeline_parallel", 2}, {"pipeline_schedule", "1f1b"}, {"data_parallel", 2}, {"expert_parallel", 2}}},
        MoeLayout{"ep2_tp2_sp",
                  4,
                  {{"tensor_parallel", 2}, {"sequence_parallel", true}, {"data_parallel", 2}, {"expert_parallel", 2}}},
        // Whole experts (etp 1) folded over the tp ranks, each routing its sequence shard, and
        // with ep < tp x dp (expert-data replicas over dp, ZeRO-1).
        MoeLayout{"ep2_tp2_etp1_sp",
                  2,
                  {{"tensor_parallel", 2},
                   {"sequence_parallel", true},
                   {"expert_parallel", 2},
                   {"expert_tensor_parallel", 1}}},
        MoeLayout{"ep2_tp2_dp2_etp1_zero1",
                  4,
                  {{"tensor_parallel", 2},
                   {"sequence_parallel", true},
                   {"data_parallel", 2},
                   {"expert_parallel", 2},
                   {"expert_tensor_parallel", 1},
                   {"zero_stage", 1}}}),
    [](const ::testing::TestParamInfo<MoeLayout>& info) { return info.param.name; });

TEST_F(MoeRuns, PlansShardrunDoesNotRunAreRefusedWithTheField) {
  nlohmann::json lora = kMoeLora;
  lora["dropout"] = 0.1;
  const std::string dropout = write_plan(dir(), "lora-dropout", "tiny-moe", moe_config({{"lora", lora}}));
  const RunResult a = shardrun(1, dropout, dir().file("lora-dropout"), "--steps 1");
  EXPECT_EQ(a.exit_code, 2) << a.output;
  EXPECT_NE(a.output.find("config.lora.dropout"), std::string::npos) << a.output;
}

// --- LoRA on the routed experts ----------------------------------------------------------

class MoeLoraRuns : public MoeRuns {
 protected:
  static std::string lora_args(const std::string& name) {
    return "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 --seed 1234 " + corpus_data_args(dir()) +
           " --save-final " + dir().file(name + ".safetensors") + " --save-adapter " + dir().file(name + "-adapter");
  }
  static std::string lora_plan(const std::string& name, nlohmann::json layout) {
    layout["lora"] = kMoeLora;
    return write_plan(dir(), name, "tiny-moe", moe_config(layout));
  }
  static const RunResult& lora_reference() {
    static const RunResult ref = shardrun(1, lora_plan("lora-ref", {}), dir().file("lora-ref"), lora_args("lora-ref"));
    return ref;
  }
};

TEST_F(MoeLoraRuns, ExpertAdaptersTrainUnderPeftNamesAndTheBaseStaysBitForBit) {
  const RunResult& ref = lora_reference();
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.02);  // adapters from B = 0 at lr 1e-3: a slow start
  // The same model from the same seed, untrained: every base tensor of the run's export equals it.
  const formats::Plan plan = formats::load_plan(dir().file("lora-ref.json"));
  executor::ModelOptions mo;
  mo.lora = plan.config.lora;
  executor::Transformer model(plan.model, mo);
  model.init_weights(1234);
  const auto base = read_floats(dir().file("lora-ref.safetensors"));
  const auto adapter = read_floats(dir().file("lora-ref-adapter/adapter_model.safetensors"));
  size_t experts = 0;
  for (const auto& p : model.parameters()) {
    const torch::Tensor init = p.tensor.contiguous();
    const std::vector<float> v(init.data_ptr<float>(), init.data_ptr<float>() + init.numel());
    if (!p.lora) {
      ASSERT_TRUE(base.count(p.name)) << p.name;
      EXPECT_EQ(base.at(p.name), v) << p.name << " changed";
      continue;
    }
    ASSERT_TRUE(adapter.count(p.name)) << p.name;
    EXPECT_NE(adapter.at(p.name), v) << p.name << " did not train";
    experts += p.name.find(".mlp.experts.") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(experts, 3u * 8 * 3 * 2);  // 3 MoE blocks x 8 experts x 3 linears x (A, B)
  EXPECT_EQ(adapter.size(), model.parameters().size() - base.size());
  // PEFT's names for a routed expert's, the shared expert's and the dense block's adapters.
  EXPECT_TRUE(adapter.count("base_model.model.model.layers.3.mlp.experts.7.down_proj.lora_B.weight"));
  EXPECT_EQ(adapter.at("base_model.model.model.layers.1.mlp.experts.0.gate_proj.lora_A.weight").size(), 8u * 128u);
  EXPECT_TRUE(adapter.count("base_model.model.model.layers.2.mlp.shared_expert.up_proj.lora_A.weight"));
  EXPECT_TRUE(adapter.count("base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight"));
}

class MoeLoraEquivalence : public MoeLoraRuns, public ::testing::WithParamInterface<MoeLayout> {};

TEST_P(MoeLoraEquivalence, SameLossesAndAdaptersAsOneRank) {
  const MoeLayout& l = GetParam();
  const RunResult& ref = lora_reference();
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const std::string name = "lora-" + l.name;
  const RunResult run = shardrun(l.ranks, lora_plan(name, l.config), dir().file(name), lora_args(name));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  // Every rank's experts' adapters gathered under their PEFT names, equal to one rank's.
  expect_same_weights(dir().file(name + "-adapter/adapter_model.safetensors"),
                      dir().file("lora-ref-adapter/adapter_model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeLoraEquivalence,
    ::testing::Values(MoeLayout{"ep2_zero3", 2, {{"data_parallel", 2}, {"expert_parallel", 2}, {"zero_stage", 3}}},
                      MoeLayout{"tp2_sp", 2, {{"tensor_parallel", 2}, {"sequence_parallel", true}}},
                      MoeLayout{"ep2_dp2_zero1", 4, {{"data_parallel", 4}, {"expert_parallel", 2}, {"zero_stage", 1}}},
                      MoeLayout{"ep2_tp2_etp1_sp",
                                2,
                                {{"tensor_parallel", 2},
                                 {"sequence_parallel", true},
                                 {"expert_parallel", 2},
                                 {"expert_tensor_parallel", 1}}}),
    [](const ::testing::TestParamInfo<MoeLayout>& info) { return info.param.name; });

// --- token dropping by expert capacity -----------------------------------------------------

// tokens_dropped of each step of a run's metrics.jsonl.
std::vector<int64_t> tokens_dropped(const std::string& out_dir) {
  std::ifstream in(std::filesystem::path(out_dir) / "metrics.jsonl");
  std::vector<int64_t> v;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line).at("tokens_dropped").get<int64_t>());
  return v;
}

TEST_F(MoeRuns, CapacityDropsTokensAndEp2DropsTheSameAsOneRank) {
  // Capacity per micro-batch of an ep rank (Megatron's routing group): ep 2 runs one rank's
  // micro-batches, so it drops the same picks, and loses the same.
  const std::string steps = "--steps 6 --dropout 0 --lr 1e-3 " + corpus_data_args(dir());
  const std::string one = write_plan(dir(), "cf1", "tiny-moe", moe_config({{"moe_capacity_factor", 1.0}}));
  const RunResult small = shardrun(1, one, dir().file("cf1"), steps);
  ASSERT_EQ(small.exit_code, 0) << small.output;
  const auto dropped = tokens_dropped(dir().file("cf1"));
  ASSERT_EQ(dropped.size(), 6u);
  for (int64_t d : dropped) EXPECT_GT(d, 0);
  EXPECT_GT(small.report.at("measured").at("tokens_dropped").get<double>(), 0.0);
  const std::string ep2 =
      write_plan(dir(), "cf1-ep2", "tiny-moe",
                 moe_config({{"moe_capacity_factor", 1.0}, {"data_parallel", 2}, {"expert_parallel", 2}}));
  const RunResult split = shardrun(2, ep2, dir().file("cf1-ep2"), steps);
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_EQ(tokens_dropped(dir().file("cf1-ep2")), dropped);
  ASSERT_EQ(split.losses.size(), small.losses.size());
  for (size_t i = 0; i < small.losses.size(); ++i)
    EXPECT_NEAR(split.losses[i], small.losses[i], 1e-5 * std::abs(small.losses[i])) << "step " << i + 1;
  // A factor of E/k = 4 gives every expert room for every token: nothing dropped, the dropless losses.
  const std::string four = write_plan(dir(), "cf4", "tiny-moe", moe_config({{"moe_capacity_factor", 4.0}}));
  const RunResult large = shardrun(1, four, dir().file("cf4"), args("cf4"));  // the reference's arguments
  ASSERT_EQ(large.exit_code, 0) << large.output;
  EXPECT_EQ(tokens_dropped(dir().file("cf4")), std::vector<int64_t>(kSteps, 0));
  const RunResult& ref = reference();
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  ASSERT_EQ(large.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(large.losses[i], ref.losses[i], 1e-6 * std::abs(ref.losses[i])) << "step " << i + 1;
  EXPECT_NE(small.losses[0], large.losses[0]);  // the same initial weights: dropping changed the output
}

}  // namespace moe_test
}  // namespace shardplan::testing
