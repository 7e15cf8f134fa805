// Tests of the fits behind measured profiles: efficiency curves (least-squares polynomial in
// log10 size) recover a known curve, respect monotonicity and bounds; the alpha-beta link fit
// recovers latency and bandwidth from ring-collective timings.
#include "simulator/efficiency_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "simulator/errors.hpp"

namespace shardplan::simulator {
namespace efficiency_fit_test {  // named, not anonymous: the files share a unity-build unit

// A smooth saturating curve, 0.2 at 1e5 rising to ~0.9 at 1e10.
double truth(double size) {
  const double u = std::log10(size) - 7.5;
  return 0.55 + 0.14 * u - 0.01 * u * u * u / 3;
}

std::vector<EfficiencySample> samples_of(double (*f)(double), double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, noise);
  std::vector<EfficiencySample> s;
  for (double lx = 5.0; lx <= 10.0; lx += 0.25)
    for (int rep = 0; rep < 3; ++rep) s.push_back({std::pow(10.0, lx), f(std::pow(10.0, lx)) + n(rng)});
  return s;
}

TEST(EfficiencyFit, RecoversAKnownCurve) {
  const CurveFit fit = fit_efficiency_curve(samples_of(truth, 0.0, 1), /*monotone=*/false);
  EXPECT_EQ(fit.degree, 3);
  EXPECT_LT(fit.rms_residual, 1e-9);
  for (double lx = 5.0; lx <= 10.0; lx += 0.5)
    EXPECT_NEAR(fit.curve.at(std::pow(10.0, lx)), truth(std::pow(10.0, lx)), 1e-3);
  EXPECT_NEAR(fit.curve.log10_x.front(), 5.0, 1e-12);
  EXPECT_NEAR(fit.curve.log10_x.back(), 10.0, 1e-12);
}

TEST(EfficiencyFit, NoisySamplesStayClose) {
  const CurveFit fit = fit_efficiency_curve(samples_of(truth, 0.03, 7), false);
  EXPECT_GT(fit.rms_residual, 0.01);
  EXPECT_LT(fit.rms_residual, 0.05);
  for (double lx = 5.5; lx <= 9.5; lx += 0.5)
    EXPECT_NEAR(fit.curve.at(std::pow(10.0, lx)), truth(std::pow(10.0, lx)), 0.03);
}

double dip(double size) {  // rises then falls (a cache cliff)
  const double u = std::log10(size) - 7.5;
  return 0.8 - 0.05 * u * u;
}

TEST(EfficiencyFit, MonotoneNeverDecreasesAndBoundsHold) {
  const CurveFit free_fit = fit_efficiency_curve(samples_of(dip, 0.0, 1), false);
  const CurveFit mono = fit_efficiency_curve(samples_of(dip, 0.0, 1), true);
  bool free_falls = false;
  for (std::size_t i = 1; i < free_fit.curve.efficiency.size(); ++i)
    free_falls |= free_fit.curve.efficiency[i] < free_fit.curve.efficiency[i - 1];
  EXPECT_TRUE(free_falls);
  for (std::size_t i = 1; i < mono.curve.efficiency.size(); ++i)
    EXPECT_GE(mono.curve.efficiency[i], mono.curve.efficiency[i - 1]);
  // Out-of-range samples are clamped into (0, 1].
  std::vector<EfficiencySample> wild{{1e3, -0.5}, {1e4, 0.5}, {1e5, 3.0}};
  for (double e : fit_efficiency_curve(wild, false).curve.efficiency) {
    EXPECT_GT(e, 0.0);
    EXPECT_LE(e, 1.0);
  }
}

TEST(EfficiencyFit, DegreeFollowsDistinctSizesAndEmptyIsAnError) {
  EXPECT_EQ(fit_efficiency_curve({{1e6, 0.5}, {1e6, 0.7}}, false).degree, 0);
  const CurveFit two = fit_efficiency_curve({{1e6, 0.4}, {1e8, 0.8}}, false);
  EXPECT_EQ(two.degree, 1);
  EXPECT_NEAR(two.curve.at(1e7), 0.6, 1e-9);
  EXPECT_THROW(fit_efficiency_curve({}, false), InputError);
}

// Ring collectives on n ranks over a link of latency alpha and bandwidth B.
std::vector<LinkSample> ring_timings(double alpha, double B, int n, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(1.0 - noise, 1.0 + noise);
  std::vector<LinkSample> s;
  const double k = n - 1.0;
  for (double S = 64; S <= 64e6; S *= 4) {
    for (auto [op, hops, wire] : {std::tuple{"all_reduce", 2 * k, 2 * k / n * S},
                                  std::tuple{"all_gather", k, k / n * S}, std::tuple{"send_recv", 2.0, 2 * S}})
      s.push_back({op, S, hops, wire, (hops * alpha + wire / B) * u(rng)});
  }
  return s;
}

TEST(LinkFit, RecoversLatencyAndBandwidth) {
  const LinkFit exact = fit_link(ring_timings(3e-6, 5e9, 4, 0.0, 1));
  EXPECT_NEAR(exact.latency_s, 3e-6, 3e-9);
  EXPECT_NEAR(exact.bandwidth_Bps, 5e9, 5e6);
  EXPECT_LT(exact.rms_relative_error, 1e-9);
  const LinkFit noisy = fit_link(ring_timings(3e-6, 5e9, 2, 0.05, 3));
  EXPECT_NEAR(noisy.latency_s, 3e-6, 0.3e-6);
  EXPECT_NEAR(noisy.bandwidth_Bps, 5e9, 0.5e9);
  EXPECT_GT(noisy.rms_relative_error, 0.005);
}

TEST(LinkFit, KeepsTermsPhysical) {
  // Pure bandwidth-bound timings with a slight negative intercept still give alpha >= 0.
  std::vector<LinkSample> s;
  for (double S = 1e6; S <= 1e8; S *= 10) s.push_back({"send_recv", S, 1, S, S / 1e9 - 1e-7});
  const LinkFit f = fit_link(s);
  EXPECT_GE(f.latency_s, 0.0);
  EXPECT_NEAR(f.bandwidth_Bps, 1e9, 0.05e9);
  EXPECT_THROW(fit_link({s.front()}), InputError);
  // Timings that shrink with size (a loaded machine) leave no bandwidth term: the link still
  // gets a usable bandwidth, the best rate measured, never 0.
  const std::vector<LinkSample> upside_down{{"all_gather", 1e3, 1, 5e2, 2e-4}, {"all_gather", 1e6, 1, 5e5, 1e-4}};
  const LinkFit g = fit_link(upside_down);
  EXPECT_DOUBLE_EQ(g.bandwidth_Bps, 5e5 / 1e-4);
}

}  // namespace efficiency_fit_test
}  // namespace shardplan::simulator
