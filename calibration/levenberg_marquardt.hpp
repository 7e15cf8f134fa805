#pragma once
// Bounded Levenberg-Marquardt on a least-squares problem in internal coordinates u. A Problem
// gives residuals(u), jacobian(u), project(u) (onto its box) and blocked(u, g, k) (parameter k on
// a bound with the descent direction pointing out of the box).
#include <Eigen/Dense>
#include <algorithm>

namespace shardplan::calibration {

struct LmOutcome {
  Eigen::VectorXd u;
  int iterations = 0;
  bool converged = false;
};

// Levenberg (1944) / Marquardt (1963): Gauss-Newton steps on |r|^2 damped by lambda*diag(J^T J),
// lambda shrunk after a successful step and grown after a failed one (Nocedal & Wright,
// Numerical Optimization, 2nd ed., ch. 10.3); normal equations solved by LDLT; bounds by projected
// steps, a parameter on a bound that the gradient pushes outward held for the step (ch. 16.7).
template <class Problem>
LmOutcome levenberg_marquardt(const Problem& f, Eigen::VectorXd u, int max_iterations) {
  LmOutcome out;
  Eigen::VectorXd r = f.residuals(u);
  double cost = r.squaredNorm(), lambda = 1e-3;
  for (int it = 0; it < max_iterations; ++it) {
    out.iterations = it + 1;
    const Eigen::MatrixXd J = f.jacobian(u);
    Eigen::MatrixXd A = J.transpose() * J;
    Eigen::VectorXd g = J.transpose() * r;
    for (Eigen::Index k = 0; k < g.size(); ++k) {  // active set: a blocked parameter is held this step
      if (!f.blocked(u, g, static_cast<std::size_t>(k))) continue;
      A.row(k).setZero();
      A.col(k).setZero();
      A(k, k) = 1;
      g[k] = 0;
    }
    if (g.lpNorm<Eigen::Infinity>() < 1e-14) {
      out.converged = true;
      break;
    }
    bool accepted = false;
    double step_size = 0, decrease = 0;
    while (!accepted && lambda < 1e12) {
      Eigen::MatrixXd M = A;
      for (Eigen::Index d = 0; d < M.rows(); ++d) M(d, d) += lambda * std::max(A(d, d), 1e-12);
      const Eigen::VectorXd trial = f.project(u - M.ldlt().solve(g));
      const Eigen::VectorXd r_trial = f.residuals(trial);
      const double c = r_trial.squaredNorm();
      if (!(c < cost)) {
        lambda *= 4;
        continue;
      }
      step_size = (trial - u).lpNorm<Eigen::Infinity>();
      decrease = (cost - c) / std::max(cost, 1e-300);
      u = trial;
      r = r_trial;
      cost = c;
      accepted = true;
      lambda = std::max(lambda / 3, 1e-12);
    }
    if (!accepted || step_size < 1e-10 || decrease < 1e-12) {
      out.converged = true;  // no descent left (a minimum, possibly on a bound) or no progress
      break;
    }
  }
  out.u = u;
  return out;
}

}  // namespace shardplan::calibration
