// Legend: x = log10(size), e = efficiency, p(x) = sum_k c_k x^k the fitted polynomial;
// alpha latency per hop, B link bandwidth, w wire bytes, h hops, t seconds.
#include "efficiency_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <set>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

constexpr double kMinEfficiency = 0.005;

double poly(const Eigen::VectorXd& c, double x) {
  double y = 0;
  for (Eigen::Index k = c.size() - 1; k >= 0; --k) y = y * x + c[k];
  return y;
}

}  // namespace

CurveFit fit_efficiency_curve(const std::vector<EfficiencySample>& samples, bool monotone, int points_per_decade) {
  if (samples.empty()) throw InputError("efficiency fit: no samples");
  std::set<long> distinct;  // sizes at 1/100 decade resolution
  double lo = 1e300, hi = -1e300;
  for (const auto& s : samples) {
    const double x = std::log10(std::max(s.size, 1.0));
    distinct.insert(std::lround(x * 100));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const int degree = std::min<int>(3, static_cast<int>(distinct.size()) - 1);
  // Centre x for conditioning: u = x - mid.
  const double mid = 0.5 * (lo + hi);
  Eigen::MatrixXd A(static_cast<Eigen::Index>(samples.size()), degree + 1);
  Eigen::VectorXd b(static_cast<Eigen::Index>(samples.size()));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double u = std::log10(std::max(samples[i].size, 1.0)) - mid;
    double p = 1;
    for (int k = 0; k <= degree; ++k, p *= u) A(static_cast<Eigen::Index>(i), k) = p;
    b[static_cast<Eigen::Index>(i)] = samples[i].efficiency;
  }
  const Eigen::VectorXd c = A.colPivHouseholderQr().solve(b);
  CurveFit fit;
  fit.degree = degree;
  fit.rms_residual = std::sqrt((A * c - b).squaredNorm() / static_cast<double>(samples.size()));
  const int n = std::max(2, static_cast<int>(std::ceil((hi - lo) * points_per_decade)) + 1);
  for (int i = 0; i < n; ++i) {
    const double x = hi > lo ? lo + (hi - lo) * i / (n - 1) : lo + i;
    double e = std::clamp(poly(c, x - mid), kMinEfficiency, 1.0);
    if (monotone && !fit.curve.efficiency.empty()) e = std::max(e, fit.curve.efficiency.back());
    fit.curve.log10_x.push_back(x);
    fit.curve.efficiency.push_back(e);
  }
  return fit;
}

LinkFit fit_link(const std::vector<LinkSample>& samples) {
  if (samples.size() < 2) throw InputError("link fit: needs at least two timed collectives");
  // Rows scaled by 1/t: minimise sum ((h*alpha + w*beta) / t - 1)^2, beta = 1/B.
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& s = samples[static_cast<std::size_t>(i)];
    A(i, 0) = s.hops / s.seconds;
    A(i, 1) = s.wire_bytes / s.seconds;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(b);
  // Keep both terms physical: a negative one is dropped and the other refitted alone.
  for (int k = 0; k < 2; ++k) {
    if (x[k] >= 0) continue;
    const int other = 1 - k;
    x[k] = 0;
    x[other] = std::max(0.0, A.col(other).dot(b) / A.col(other).squaredNorm());
  }
  LinkFit fit;
  fit.latency_s = x[0];
  fit.bandwidth_Bps = x[1] > 0 ? 1.0 / x[1] : 0.0;
  if (!(fit.bandwidth_Bps > 0)) {
    // Noisy timings (a loaded machine) can leave no size dependence to fit: fall back on the
    // best rate any collective achieved, a lower bound of the link's bandwidth.
    for (const auto& s : samples) fit.bandwidth_Bps = std::max(fit.bandwidth_Bps, s.wire_bytes / s.seconds);
  }
  fit.rms_relative_error = std::sqrt((A * x - b).squaredNorm() / static_cast<double>(n));
  return fit;
}

}  // namespace shardplan::simulator
