// The MoE load-balancing auxiliary loss: its value and gradient against the closed form, and runs
// of the real shardrun under mpirun with --moe-aux-loss-coeff giving the same per-step losses,
// aux values and final weights as a single-rank run whatever the layout (expert, tensor with
// whole or split experts, context and data parallel).
#include <gtest/gtest.h>

#include <cmath>

#include "executor/model/moe_aux_loss.hpp"
#include "harness.hpp"

namespace shardplan::testing {
namespace moe_aux_loss_test {  // named, not anonymous: the files share a unity-build unit

namespace ex = shardplan::executor;

// aux = coeff E / (k T^2) sum_e (sum_n p_ne) c_e; its gradient on p_ne is scale coeff E c_e / (k T^2).
TEST(MoeAuxLoss, ValueAndGradientFollowTheSwitchFormula) {
  torch::manual_seed(3);
  const int64_t N = 6, E = 4, k = 2;
  const torch::Tensor logits = torch::randn({N, E});
  const torch::Tensor probs = logits.softmax(-1).detach().requires_grad_(true);
  const torch::Tensor top_e = std::get<1>(probs.detach().topk(k, -1));
  const torch::Tensor out = torch::randn({N, 3}).requires_grad_(true);
  const double coeff = 0.01, scale = 0.25;
  ex::set_moe_aux_loss_scale(scale);
  double value = 0;
  const torch::Tensor y = ex::attach_aux_loss(out, probs, top_e, {coeff, {}, 1.0}, &value);
  const torch::Tensor counts = torch::bincount(top_e.reshape({-1}), {}, E).to(torch::kFloat);
  const double expect = coeff * E / (k * double(N) * N) * (probs.detach().sum(0) * counts).sum().item<double>();
  EXPECT_NEAR(value, expect, 1e-9);
  EXPECT_TRUE(torch::equal(y.detach(), out.detach()));  // the output passes through
  y.sum().backward();
  const torch::Tensor want = (counts * (scale * coeff * E / (k * double(N) * N))).expand({N, E});
  EXPECT_TRUE(torch::allclose(probs.grad(), want, 1e-6, 1e-9));
  EXPECT_TRUE(torch::allclose(out.grad(), torch::ones_like(out)));
  // Two replicas of the same tokens each hold half.
  double half = 0;
  ex::attach_aux_loss(out, probs, top_e, {coeff, {}, 2.0}, &half);
  EXPECT_NEAR(half, expect / 2, 1e-9);
}

struct AuxLayout {
  std::string name;
  int ranks;
  nlohmann::json config;
};

std::ostream& operator<<(std::ostream& os, const AuxLayout& l) { return os << l.name; }

nlohmann::json aux_config(const nlohmann::json& overrides) {
  nlohmann::json cfg = {
      {"expert_parallel", 1}, {"expert_tensor_parallel", 0}, {"context_parallel", 1}, {"moe_capacity_factor", 0}};
  for (auto& [k, v] : overrides.items()) cfg[k] = v;
  if (cfg["expert_tensor_parallel"] == 0) cfg["expert_tensor_parallel"] = cfg.value("tensor_parallel", 1);
  return cfg;
}

constexpr int kSteps = 12;

class MoeAuxRuns : public ::testing::TestWithParam<AuxLayout> {
 protected:
  static TempDir* dir_;
  static std::map<double, RunResult> refs_;  // per suite: the TEST_F and the TEST_P suites each make theirs
  static void SetUpTestSuite() {
    dir_ = new TempDir("shardrun_moe_aux");
    refs_.clear();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string args(const std::string& name, double coeff) {
    return "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 --moe-aux-loss-coeff " +
           std::to_string(coeff) + " " + corpus_data_args(*dir_) + " --save-final " + dir_->file(name + ".safetensors");
  }
  static const RunResult& reference(double coeff) {
    if (!refs_.count(coeff)) {
      const std::string name = coeff > 0 ? "ref-aux" : "ref-noaux";
      refs_[coeff] =
          shardrun(1, write_plan(*dir_, name, "tiny-moe", aux_config({})), dir_->file(name), args(name, coeff));
    }
    return refs_[coeff];
  }
  static std::vector<double> aux_values(const std::string& run) {
    std::vector<double> v;
    std::ifstream in(std::filesystem::path(dir_->file(run)) / "metrics.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) v.push_back(nlohmann::json::parse(line).value("moe_aux_loss", -1.0));
    return v;
  }
};
TempDir* MoeAuxRuns::dir_ = nullptr;
std::map<double, RunResult> MoeAuxRuns::refs_;

TEST_F(MoeAuxRuns, TheAuxLossTrainsTheRouterAndIsReported) {
  const RunResult& with = reference(0.01);
  const RunResult& without = reference(0.0);
  ASSERT_EQ(with.exit_code, 0) << with.output;
  ASSERT_EQ(without.exit_code, 0) << without.output;
  // The first step's forward is the same; the aux gradient changes the router from step 2 on.
  EXPECT_DOUBLE_EQ(with.losses.front(), without.losses.front());
  EXPECT_NE(with.losses.back(), without.losses.back());
  for (double a : aux_values("ref-aux")) EXPECT_GT(a, 0.0);
  for (double a : aux_values("ref-noaux")) EXPECT_EQ(a, -1.0);  // not written when off
}

TEST_P(MoeAuxRuns, SameLossesAuxAndWeightsAsOneRank) {
  const AuxLayout& l = GetParam();
  const RunResult& ref = reference(0.01);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const RunResult run = shardrun(l.ranks, write_plan(*dir_, l.name, "tiny-moe", aux_config(l.config)),
                                 dir_->file(l.name), args(l.name, 0.01));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  const auto a = aux_values(l.name), b = aux_values("ref-aux");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(b[i])) << "step " << i + 1;
  expect_same_weights(dir_->file(l.name + ".safetensors"), dir_->file("ref-aux.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeAuxRuns,
    ::testing::Values(AuxLayout{"ep2_dp2_zero1", 2, {{"data_parallel", 2}, {"expert_parallel", 2}, {"zero_stage", 1}}},
                      AuxLayout{"tp2_sp", 2, {{"tensor_parallel", 2}, {"sequence_parallel", true}}},
                      AuxLayout{"ep2_tp2_etp1_sp",
                                2,
                                {{"tensor_parallel", 2},
                                 {"sequence_parallel", true},
                                 {"expert_parallel", 2},
                                 {"expert_tensor_parallel", 1}}},
                      AuxLayout{"cp2_ring_ep2",
                                2,
                                {{"context_parallel", 2}, {"context_parallel_kind", "ring"}, {"expert_parallel", 2}}}),
    [](const ::testing::TestParamInfo<AuxLayout>& info) { return info.param.name; });

}  // namespace moe_aux_loss_test
}  // namespace shardplan::testing
