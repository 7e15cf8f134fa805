// The joint fit of hardware and framework compute terms against synthetic measurements: step
// times simulated with known hardware and framework factors must give those factors back; a
// held-out framework is predicted at compute_efficiency 1 with the others' fit; bad input is named.
#include <gtest/gtest.h>

#include <cmath>

#include "calibration/framework_fit.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::calibration {
namespace framework_fit_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;

// The "true" factors: each family's sustained rate over its shipped fit, each framework's term.
// The frameworks' are symmetric in ln, where the prior's pull vanishes.
constexpr double kA100 = 0.9, kH100 = 0.8, kFast = 1.1, kSlow = 1.0 / 1.1;

Plan plan_on(const std::string& profile, int seq) {
  Plan p;
  p.model = sim::load_model("llama2-7b");
  p.cluster = sim::ClusterSpec{sim::load_hardware(profile), 1, 8};
  sim::ParallelConfig& c = p.config;
  c.dp = 8;
  c.zero_stage = 1;
  c.micro_batch_size = 1;
  c.global_batch_size = 16;
  c.seq_len = seq;
  return p;
}

double step_s(const Plan& p, double hardware_factor, double framework_factor) {
  sim::HardwareProfile hw = p.cluster.hardware;
  for (double& f : hw.device.peak_flops) f *= hardware_factor;  // by hand, not through the code under test
  sim::ParallelConfig cfg = p.config;
  cfg.framework.compute_efficiency = framework_factor;
  return sim::simulate(p.model, sim::ClusterSpec{hw, 1, 8}, cfg).time.step_s;
}

std::vector<MeasuredRun> runs() {
  std::vector<MeasuredRun> out;
  for (const auto& [profile, hw] : {std::pair{"p4de.24xlarge", kA100}, {"p5.48xlarge", kH100}})
    for (const auto& [fw, eff] : {std::pair{"fast", kFast}, {"slow", kSlow}})
      for (int seq : {1024, 4096}) {
        Plan p = plan_on(profile, seq);
        p.config.framework.name = fw;
        const double measured = step_s(p, hw, eff);
        out.push_back(MeasuredRun{std::string(profile) + "-" + fw + "-" + std::to_string(seq), std::move(p), measured,
                                  false, "synthetic", true, "synthetic", fw});
      }
  return out;
}

const FittedTerm& term(const FrameworkFitResult& r, TermKind kind, const std::string& name) {
  for (const auto& t : r.terms)
    if (t.kind == kind && t.name.find(name) != std::string::npos) return t;
  throw std::runtime_error("no term " + name);
}

TEST(FrameworkFit, RecoversTheHardwareAndFrameworkFactors) {
  const std::vector<MeasuredRun> rs = runs();
  FrameworkFitOptions weak;
  weak.prior_sd = 10;  // the data fix the ratios; a weak prior only the split (symmetric in ln: the truth)
  const FrameworkFitResult r = fit_frameworks(rs, weak);
  ASSERT_EQ(r.terms.size(), 4u);  // two families' 16-bit terms, two frameworks (no FP8 run)
  const double a100 = sim::load_hardware("p4de.24xlarge").fitted.compute_efficiency_scale;
  const double h100 = sim::load_hardware("p5.48xlarge").fitted.compute_efficiency_scale;
  EXPECT_NEAR(term(r, TermKind::hardware_16bit, "p4de").fitted / a100, kA100, 0.01);
  EXPECT_NEAR(term(r, TermKind::hardware_16bit, "p5").fitted / h100, kH100, 0.01);
  EXPECT_NEAR(term(r, TermKind::framework, "fast").fitted, kFast, 0.01);
  EXPECT_NEAR(term(r, TermKind::framework, "slow").fitted, kSlow, 0.01);
  EXPECT_EQ(term(r, TermKind::framework, "fast").runs, 4);
  EXPECT_GT(r.fit_before.mean, 0.05);
  EXPECT_LT(r.fit_after.mean, 0.005);
  EXPECT_TRUE(r.converged);
}

TEST(FrameworkFit, ThePriorShrinksAFrameworkTowardTheCommonRate) {
  const FrameworkFitResult r = fit_frameworks(runs());  // sd 0.10 against 8 runs
  const double fast = term(r, TermKind::framework, "fast").fitted, slow = term(r, TermKind::framework, "slow").fitted;
  EXPECT_GT(fast, 1.0);
  EXPECT_LT(fast, kFast - 0.005);
  EXPECT_LT(slow, 1.0);
  EXPECT_GT(slow, kSlow + 0.005);
  EXPECT_GT(term(r, TermKind::framework, "fast").std_error, 0);
}

TEST(FrameworkFit, AHeldOutFrameworkIsPredictedAtTheCommonRate) {
  const std::vector<MeasuredRun> rs = runs();
  FrameworkFitOptions o;
  o.held_out = "slow";
  const FrameworkFitResult r = fit_frameworks(rs, o);
  EXPECT_DOUBLE_EQ(term(r, TermKind::framework, "slow").fitted, 1.0);
  EXPECT_EQ(term(r, TermKind::framework, "slow").runs, 0);
  EXPECT_EQ(r.heldout_after.runs, 4);
  EXPECT_EQ(r.fit_after.runs, 4);
  // Fitted to "fast" alone, the prior keeps its term at 1 and the hardware takes the product; the
  // slow framework's runs, at 1, are then predicted too fast by about its true loss.
  EXPECT_LT(r.heldout_bias, -0.05);
  for (std::size_t i = 0; i < r.runs.size(); ++i)
    EXPECT_EQ(r.runs[i].holdout, r.run_frameworks[i] == "slow") << r.runs[i].name;
  const auto lofo = leave_one_framework_out_joint(rs);
  ASSERT_EQ(lofo.size(), 2u);
  EXPECT_TRUE(lofo[0].predicted);
  EXPECT_EQ(lofo[1].framework, "slow");
  EXPECT_NEAR(lofo[1].bias, r.heldout_bias, 1e-12);
}

TEST(FrameworkFit, BadInputNamesWhatIsWrong) {
  std::vector<MeasuredRun> rs = runs();
  FrameworkFitOptions o;
  o.held_out = "nope";
  try {
    fit_frameworks(rs, o);
    FAIL() << "expected an InputError";
  } catch (const sim::InputError& e) { EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what(); }
  rs[2].framework.clear();
  try {
    fit_frameworks(rs);
    FAIL() << "expected an InputError";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'framework'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(rs[2].name), std::string::npos) << e.what();
  }
}

}  // namespace framework_fit_test
}  // namespace shardplan::calibration
