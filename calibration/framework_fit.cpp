// The joint fit of hardware and framework compute terms (see the legend in framework_fit.hpp).
#include "framework_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>

#include "levenberg_marquardt.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;

namespace {

using HW = sim::HardwareProfile;

// The terms the runs touch, and which ones each run depends on (-1: none).
struct Term {
  TermKind kind;
  std::string key;                 // family: its fitted block's source line; framework: its name
  std::vector<std::string> names;  // the profiles, or the framework
  double shipped = 1;
  int fitting_runs = 0;
  [[nodiscard]] std::string name() const {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }
};
enum Slot { kHw16 = 0, kHw8 = 1, kFw = 2 };

struct Layout {
  std::vector<Term> terms;
  std::vector<std::array<int, 3>> of_run;
};

int find_or_add(std::vector<Term>& terms, TermKind kind, const std::string& key, const std::string& name,
                double shipped) {
  for (std::size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].kind != kind || terms[k].key != key) continue;
    if (std::find(terms[k].names.begin(), terms[k].names.end(), name) == terms[k].names.end())
      terms[k].names.push_back(name);
    return static_cast<int>(k);
  }
  terms.push_back({kind, key, {name}, shipped, 0});
  return static_cast<int>(terms.size()) - 1;
}

Layout layout_of(const std::vector<MeasuredRun>& runs, const std::string& held_out) {
  Layout L;
  for (const auto& r : runs) {
    if (r.framework.empty() || r.framework == "unnamed")
      throw sim::InputError("run '" + r.name + "' of " + r.source +
                            ": field 'framework': expected the framework that ran it (calibrate --frameworks fits "
                            "one term per framework)");
    const HW& hw = r.plan.cluster.hardware;
    std::array<int, 3> slots{-1, -1, -1};
    if (hw.fitted.present) {
      slots[kHw16] =
          find_or_add(L.terms, TermKind::hardware_16bit, hw.fitted.source, hw.name, hw.fitted.compute_efficiency_scale);
      if (r.plan.config.uses_fp8())
        slots[kHw8] = find_or_add(L.terms, TermKind::hardware_fp8, hw.fitted.source, hw.name,
                                  hw.fitted.fp8_compute_efficiency_scale);
    }
    slots[kFw] =
        find_or_add(L.terms, TermKind::framework, r.framework, r.framework, r.plan.config.framework.compute_efficiency);
    if (r.framework != held_out)
      for (int s : slots)
        if (s >= 0) ++L.terms[s].fitting_runs;
    L.of_run.push_back(slots);
  }
  return L;
}

// The least-squares problem in u = ln(multiplier) of the active terms.
struct JointProblem {
  const std::vector<MeasuredRun>* runs = nullptr;
  const Layout* L = nullptr;
  std::string held_out;
  std::vector<int> fitting;      // run indices
  std::vector<int> active;       // term indices with fitting runs
  std::vector<int> column_of;    // term index -> column in u, or -1
  std::vector<int> prior_terms;  // columns of framework terms (one prior row each)
  double prior_weight = 1;

  [[nodiscard]] double multiplier(const Eigen::VectorXd& u, int term) const {
    return term >= 0 && column_of[term] >= 0 ? std::exp(u[column_of[term]]) : 1.0;
  }
  // An FP8 term no fitting run informs (its framework held out) takes the family's 16-bit
  // sustained fraction: what the hardware sustains, without the FP8 runs' own figure.
  [[nodiscard]] double fp8_multiplier(const Eigen::VectorXd& u, const std::array<int, 3>& slots) const {
    const int t8 = slots[kHw8], t16 = slots[kHw16];
    if (t8 < 0 || column_of[t8] >= 0 || t16 < 0) return multiplier(u, t8);
    return L->terms[t16].shipped * multiplier(u, t16) / L->terms[t8].shipped;
  }
  [[nodiscard]] double predict(int i, const Eigen::VectorXd& u) const {
    const MeasuredRun& r = (*runs)[i];
    const auto& slots = L->of_run[i];
    static const ParamSpec& compute = calibration_parameters()[parameter_index("compute_scale")];
    static const ParamSpec& fp8 = calibration_parameters()[parameter_index("fp8_compute_scale")];
    HW hw = r.plan.cluster.hardware;
    compute.apply(hw, multiplier(u, slots[kHw16]));
    fp8.apply(hw, fp8_multiplier(u, slots));
    sim::ParallelConfig cfg = r.plan.config;
    if (r.framework == held_out) cfg.framework.compute_efficiency = 1.0;  // no runs: the common rate
    else cfg.framework.compute_efficiency *= multiplier(u, slots[kFw]);
    const sim::ClusterSpec cluster{hw, r.plan.cluster.nodes, r.plan.cluster.per_node()};
    try {
      return sim::simulate(r.plan.model, cluster, cfg).time.step_s;
    } catch (const sim::InputError& e) {
      throw sim::InputError("run '" + r.name + "' of " + r.source + ": " + e.what());
    }
  }
  [[nodiscard]] double run_residual(int i, const Eigen::VectorXd& u) const {
    return std::log(predict(i, u)) - std::log((*runs)[i].measured_step_s);
  }
  [[nodiscard]] double prior_residual(std::size_t p, const Eigen::VectorXd& u) const {
    const int col = prior_terms[p];
    return prior_weight * (std::log(L->terms[active[col]].shipped) + u[col]);
  }
  [[nodiscard]] Eigen::VectorXd residuals(const Eigen::VectorXd& u) const {
    Eigen::VectorXd r(fitting.size() + prior_terms.size());
    for (std::size_t k = 0; k < fitting.size(); ++k) r[k] = run_residual(fitting[k], u);
    for (std::size_t p = 0; p < prior_terms.size(); ++p) r[fitting.size() + p] = prior_residual(p, u);
    return r;
  }
  // Central differences, per run over the (at most three) terms it depends on.
  [[nodiscard]] Eigen::MatrixXd jacobian(const Eigen::VectorXd& u) const {
    Eigen::MatrixXd J = Eigen::MatrixXd::Zero(fitting.size() + prior_terms.size(), u.size());
    constexpr double h = 1e-4;
    for (std::size_t k = 0; k < fitting.size(); ++k)
      for (int term : L->of_run[fitting[k]]) {
        if (term < 0 || column_of[term] < 0) continue;
        Eigen::VectorXd hi = u, lo = u;
        hi[column_of[term]] += h;
        lo[column_of[term]] -= h;
        J(k, column_of[term]) = (run_residual(fitting[k], hi) - run_residual(fitting[k], lo)) / (2 * h);
      }
    for (std::size_t p = 0; p < prior_terms.size(); ++p) J(fitting.size() + p, prior_terms[p]) = prior_weight;
    return J;
  }
  static constexpr double kBound = 4.6;  // ln 100: a term within a factor of 100 either way
  [[nodiscard]] Eigen::VectorXd project(Eigen::VectorXd u) const { return u.cwiseMax(-kBound).cwiseMin(kBound); }
  [[nodiscard]] bool blocked(const Eigen::VectorXd& u, const Eigen::VectorXd& g, std::size_t k) const {
    return (u[k] <= -kBound && g[k] > 0) || (u[k] >= kBound && g[k] < 0);
  }
};

// Standard errors of the active terms: cov = s^2 (J^T J)^-1 with the prior rows in J and s^2 from
// the runs' residuals (Nocedal & Wright ch. 10.3); the delta method turns ln errors into factors.
std::vector<double> standard_errors(const JointProblem& p, const Eigen::VectorXd& u) {
  std::vector<double> se(u.size(), -1.0);
  const auto m = static_cast<Eigen::Index>(p.fitting.size()), n = u.size();
  if (m <= n || n == 0) return se;
  const Eigen::MatrixXd J = p.jacobian(u);
  const double s2 = p.residuals(u).head(m).squaredNorm() / static_cast<double>(m - n);
  const Eigen::MatrixXd A = J.transpose() * J;
  Eigen::FullPivLU<Eigen::MatrixXd> lu(A);
  if (!lu.isInvertible()) return se;
  const Eigen::MatrixXd cov = s2 * lu.inverse();
  for (Eigen::Index k = 0; k < n; ++k) se[k] = std::sqrt(std::max(0.0, cov(k, k)));
  return se;
}

// Why the held-out framework cannot be predicted honestly: a hardware term its runs need that only
// they inform ("" when every such term has other runs).
std::string unpredictable_reason(const Layout& L, const std::vector<MeasuredRun>& runs, const std::string& held_out) {
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].framework != held_out) continue;
    if (const int s = L.of_run[i][kHw16]; s >= 0 && L.terms[s].fitting_runs == 0)
      return std::string("its runs alone inform the ") + to_string(L.terms[s].kind) + " term of " + L.terms[s].name();
  }
  return "";
}

}  // namespace

const char* to_string(TermKind k) {
  switch (k) {
    case TermKind::hardware_16bit:
      return "hardware 16-bit compute";
    case TermKind::hardware_fp8:
      return "hardware FP8 compute";
    case TermKind::framework:
      return "framework compute_efficiency";
  }
  return "?";
}

FrameworkFitResult fit_frameworks(const std::vector<MeasuredRun>& runs, const FrameworkFitOptions& options) {
  const Layout L = layout_of(runs, options.held_out);
  if (!options.held_out.empty()) {
    if (std::none_of(runs.begin(), runs.end(), [&](const MeasuredRun& r) { return r.framework == options.held_out; }))
      throw sim::InputError("held-out framework '" + options.held_out + "': no run names it");
    if (const std::string why = unpredictable_reason(L, runs, options.held_out); !why.empty())
      throw sim::InputError("framework '" + options.held_out + "' cannot be held out: " + why);
  }
  JointProblem p{
      &runs, &L, options.held_out, {}, {}, std::vector<int>(L.terms.size(), -1), {}, options.run_sd / options.prior_sd};
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].framework != options.held_out) p.fitting.push_back(static_cast<int>(i));
  if (p.fitting.empty()) throw sim::InputError("calibrate --frameworks: no fitting run");
  for (std::size_t k = 0; k < L.terms.size(); ++k) {
    if (L.terms[k].fitting_runs == 0) continue;
    p.column_of[k] = static_cast<int>(p.active.size());
    if (L.terms[k].kind == TermKind::framework) p.prior_terms.push_back(static_cast<int>(p.active.size()));
    p.active.push_back(static_cast<int>(k));
  }
  FrameworkFitResult res;
  for (std::size_t k = 0; k < L.terms.size(); ++k)
    if (L.terms[k].kind == TermKind::hardware_fp8 && L.terms[k].fitting_runs == 0)
      res.notes.push_back("no fitting run uses FP8 on " + L.terms[k].name() +
                          ": its FP8 curve taken at the 16-bit term's sustained fraction");
  const Eigen::VectorXd u0 = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(p.active.size()));
  const LmOutcome lm = levenberg_marquardt(p, u0, options.max_iterations);
  res.iterations = lm.iterations;
  res.converged = lm.converged;
  if (!lm.converged)
    res.notes.push_back("Levenberg-Marquardt stopped after " + std::to_string(lm.iterations) +
                        " iterations without converging");
  const std::vector<double> se = standard_errors(p, lm.u);
  for (std::size_t k = 0; k < L.terms.size(); ++k) {
    const Term& t = L.terms[k];
    FittedTerm out{t.kind, t.name(), t.fitting_runs, t.shipped, t.shipped, -1};
    if (const int col = p.column_of[k]; col >= 0) {
      out.fitted = t.shipped * std::exp(lm.u[col]);
      if (se[col] >= 0) out.std_error = out.fitted * se[col];
    } else if (t.kind == TermKind::framework && t.key == options.held_out) {
      out.fitted = 1.0;
    }
    res.terms.push_back(out);
  }
  std::vector<double> fit_before, fit_after, held;
  JointProblem shipped = p;  // the shipped terms, every framework at its own (none held out)
  shipped.held_out.clear();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const MeasuredRun& r = runs[i];
    RunResult rr{r.name, r.framework == options.held_out, r.plan.cluster.nodes, r.measured_step_s, 0, 0};
    rr.before_s = shipped.predict(static_cast<int>(i), u0);
    rr.after_s = p.predict(static_cast<int>(i), lm.u);
    (rr.holdout ? held : fit_after).push_back(rr.error_after());
    if (!rr.holdout) fit_before.push_back(rr.error_before());
    res.runs.push_back(rr);
    res.run_frameworks.push_back(r.framework);
  }
  res.fit_before = error_stats(fit_before);
  res.fit_after = error_stats(fit_after);
  signed_stats(held, res.heldout_after, res.heldout_bias);
  return res;
}

std::vector<FrameworkHoldout> leave_one_framework_out_joint(const std::vector<MeasuredRun>& runs,
                                                            const FrameworkFitOptions& options) {
  std::vector<std::string> frameworks;
  for (const auto& r : runs)
    if (std::find(frameworks.begin(), frameworks.end(), r.framework) == frameworks.end())
      frameworks.push_back(r.framework);
  std::vector<FrameworkHoldout> out;
  for (const auto& f : frameworks) {
    FrameworkHoldout h;
    h.framework = f;
    h.runs = static_cast<int>(std::count_if(runs.begin(), runs.end(), [&](const auto& r) { return r.framework == f; }));
    h.why_not = unpredictable_reason(layout_of(runs, f), runs, f);
    if (h.why_not.empty() && h.runs < static_cast<int>(runs.size())) {
      FrameworkFitOptions o = options;
      o.held_out = f;
      const FrameworkFitResult res = fit_frameworks(runs, o);
      h.predicted = true;
      h.error = res.heldout_after;
      h.bias = res.heldout_bias;
      h.notes = res.notes;
    } else if (h.why_not.empty()) {
      h.why_not = "no other framework's runs";
    }
    out.push_back(std::move(h));
  }
  return out;
}

nlohmann::json to_json(const FrameworkFitResult& r) {
  nlohmann::json terms = nlohmann::json::array(), runs = nlohmann::json::array();
  for (const auto& t : r.terms) {
    nlohmann::json j{{"kind", to_string(t.kind)},
                     {"name", t.name},
                     {"fitting_runs", t.runs},
                     {"shipped", t.shipped},
                     {"fitted", t.fitted}};
    if (t.std_error >= 0) j["std_error"] = t.std_error;
    terms.push_back(std::move(j));
  }
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    const RunResult& rr = r.runs[i];
    runs.push_back({{"name", rr.name},
                    {"framework", r.run_frameworks[i]},
                    {"held_out", rr.holdout},
                    {"measured_step_s", rr.measured_s},
                    {"before_step_s", rr.before_s},
                    {"after_step_s", rr.after_s}});
  }
  auto stats = [](const ErrorStats& s) {
    return nlohmann::json{{"runs", s.runs}, {"mean_abs", s.mean}, {"median_abs", s.median}, {"worst_abs", s.worst}};
  };
  return {{"schema", "shardplan.framework-fit/1"},
          {"method", std::string(kMethod) + ", ln(compute_efficiency) of each framework with a normal prior"},
          {"terms", terms},
          {"runs", runs},
          {"fit_before", stats(r.fit_before)},
          {"fit_after", stats(r.fit_after)},
          {"held_out_after", stats(r.heldout_after)},
          {"iterations", r.iterations},
          {"converged", r.converged},
          {"notes", r.notes}};
}

}  // namespace shardplan::calibration
