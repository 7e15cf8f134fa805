// Mixture of experts in shardrun (tiny-moe: 4 blocks, the first dense, 8 experts top-2 of width
// 256 plus a shared expert). In-process: the routed experts (sorted dispatch, grouped experts,
// index_add combine) give Hugging Face's per-expert loop's output and gradients, with and
// without top-k renormalisation, and every local expert gets a gradient even with no token.
// Under mpirun: the loss falls over 20 steps, and tp 2 with SP (the planner's MoE plans with tp
// > 1 have SP, as Megatron-Core requires), dp 2 at ZeRO 0/2/3, pp 2, ep 2 (ZeRO 0 and 3),
// ep 2 x dp 2 ZeRO-1 and ep 2 x tp 2 give the single-rank run's losses (1e-5 relative) and,
// gathered, its final weights, and report.json has their all-to-all seconds and router
// imbalance; plans shardrun does not run are refused.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/model/moe_block.hpp"
#include "harness.hpp"

namespace shardplan::testing {
namespace {

using executor::ExpertWeights;
using executor::MoeMlp;

constexpr int kSteps = 20;

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
torch::Tensor hf_reference(const MoeMlp& m, const torch::Tensor& x) {
  torch::Tensor probs = torch::softmax(torch::matmul(x, m.router.t()).to(torch::kFloat), 1);
  auto [w, sel] = probs.topk(m.top_k, -1);
  if (m.renormalize) w = w / w.sum(-1, true);
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
    for (const auto& t : {e.gate, e.up, e.down}) g.push_back(t.grad().defined() ? t.grad().clone() : torch::zeros_like(t));
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
      EXPECT_TRUE(torch::allclose(g_ours[i], g_ref[i], 1e-4, 1e-5)) << "gradient " << i << " renormalize " << renormalize;
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

// --- runs of the real shardrun ------------------------------------------------------------

// The MoE settings of a test plan: one rank's defaults, then the layout's own.
nlohmann::json moe_config(nlohmann::json overrides) {
  nlohmann::json cfg = {{"expert_parallel", 1}, {"expert_tensor_parallel", 0}, {"context_parallel", 1},
                        {"moe_capacity_factor", 0}};
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
  if (l.config.value("expert_parallel", 1) > 1) EXPECT_GT(measured.at("a2a_seconds").get<double>(), 0.0);
  else EXPECT_EQ(measured.at("a2a_seconds").get<double>(), 0.0);
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
        MoeLayout{"ep2_tp2_sp", 4,
                  {{"tensor_parallel", 2}, {"sequence_parallel", true}, {"data_parallel", 2}, {"expert_parallel", 2}}}),
    [](const ::testing::TestParamInfo<MoeLayout>& info) { return info.param.name; });

TEST_F(MoeRuns, PlansShardrunDoesNotRunAreRefusedWithTheField) {
  const std::string capacity =
      write_plan(dir(), "capacity", "tiny-moe", moe_config({{"moe_capacity_factor", 1.25}}));
  const RunResult a = shardrun(1, capacity, dir().file("capacity"), "--steps 1");
  EXPECT_EQ(a.exit_code, 2) << a.output;
  EXPECT_NE(a.output.find("config.moe_capacity_factor"), std::string::npos) << a.output;
  const std::string ckpt =
      write_plan(dir(), "ep2ck", "tiny-moe", moe_config({{"data_parallel", 2}, {"expert_parallel", 2}}));
  const RunResult b = shardrun(2, ckpt, dir().file("ep2ck"), "--steps 1 --checkpoint-dir " + quote(dir().file("ck")));
  EXPECT_EQ(b.exit_code, 2) << b.output;
  EXPECT_NE(b.output.find("config.expert_parallel"), std::string::npos) << b.output;
}

}  // namespace
}  // namespace shardplan::testing
