// Legend: x = log10(size), e = efficiency, p(x) = sum_k c_k x^k the fitted polynomial;
// alpha latency per hop, B link bandwidth, w wire bytes, h hops, t seconds.
#include "efficiency_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
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

namespace {

struct TwoTermFit {
  double a = 0, b = 0;  // t = u a + v b
  double rms_relative_error = 0;
};

// Least squares of t = u a + v b on relative errors (rows scaled by 1/t: minimise
// sum ((u a + v b) / t - 1)^2), both coefficients kept >= 0: a negative one is dropped and the
// other refitted alone. Rows: {u, v, t}.
TwoTermFit fit_two_terms(const std::vector<std::array<double, 3>>& rows) {
  const auto n = static_cast<Eigen::Index>(rows.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& [u, v, t] = rows[static_cast<std::size_t>(i)];
    A(i, 0) = u / t;
    A(i, 1) = v / t;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(b);
  for (int k = 0; k < 2; ++k) {
    if (x[k] >= 0) continue;
    const int other = 1 - k;
    x[k] = 0;
    x[other] = std::max(0.0, A.col(other).dot(b) / A.col(other).squaredNorm());
  }
  return {x[0], x[1], std::sqrt((A * x - b).squaredNorm() / static_cast<double>(n))};
}

}  // namespace

LinkFit fit_link(const std::vector<LinkSample>& samples) {
  if (samples.size() < 2) throw InputError("link fit: needs at least two timed collectives");
  std::vector<std::array<double, 3>> rows;
  for (const auto& s : samples) rows.push_back({s.hops, s.wire_bytes, s.seconds});
  const TwoTermFit x = fit_two_terms(rows);
  LinkFit fit;
  fit.latency_s = x.a;
  fit.bandwidth_Bps = x.b > 0 ? 1.0 / x.b : 0.0;
  if (!(fit.bandwidth_Bps > 0)) {
    // Noisy timings (a loaded machine) can leave no size dependence to fit: fall back on the
    // best rate any collective achieved, a lower bound of the link's bandwidth.
    for (const auto& s : samples) fit.bandwidth_Bps = std::max(fit.bandwidth_Bps, s.wire_bytes / s.seconds);
  }
  fit.rms_relative_error = x.rms_relative_error;
  return fit;
}

double streamed_operand_bytes(const std::array<double, 3>& operand_bytes, double cache_share_bytes) {
  double streamed = 0;
  for (double b : operand_bytes)
    if (b > cache_share_bytes) streamed += b;
  return streamed;
}

GemmStreamFit fit_gemm_stream(const std::vector<GemmSample>& samples) {
  if (samples.size() < 2) throw InputError("GEMM stream fit: needs at least two timed GEMMs");
  std::vector<std::array<double, 3>> rows;
  for (const auto& s : samples) rows.push_back({s.flops, s.streamed_bytes, s.seconds});
  const TwoTermFit x = fit_two_terms(rows);
  GemmStreamFit fit;
  fit.flop_rate = x.a > 0 ? 1.0 / x.a : 0.0;
  fit.stream_Bps = x.b > 0 ? 1.0 / x.b : 0.0;
  fit.rms_relative_error = x.rms_relative_error;
  return fit;
}

}  // namespace shardplan::simulator
