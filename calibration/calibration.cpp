// Calibration: measured runs in, a refitted hardware profile out (see calibration.hpp).
#include "calibration.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "levenberg_marquardt.hpp"
#include "number_text.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "validation.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using HW = sim::HardwareProfile;
using nlohmann::json;

namespace {

// A path in a runs file is relative to that file's directory.
std::string resolve_relative(const std::string& json_path, const std::string& p) {
  if (fs::path(p).is_absolute()) return p;
  return (fs::path(json_path).parent_path() / p).lexically_normal().string();
}

std::string unique_name(const std::string& name, std::set<std::string>& taken) {
  std::string n = name;
  for (int k = 2; !taken.insert(n).second; ++k) n = name + "#" + std::to_string(k);
  return n;
}

// One entry of "runs": appended to out.runs when it ran and its time was judged.
void read_run(const json& r, const std::string& path, const sim::JsonContext& rctx, MeasuredRuns& out,
              std::set<std::string>& taken) {
  if (!r.is_object()) throw sim::InputError(path + ": field '" + rctx.prefix + "': expected an object (a run)");
  const std::string name = sim::get_string(r, "name", rctx);
  const std::string status = sim::get_string(r, "status", rctx);
  if (status != "ran") {
    const std::string reason = sim::get_string_or(r, "reason", "", rctx);
    out.ignored.push_back(name + ": status " + status + (reason.empty() ? "" : " (" + reason + ")"));
    return;
  }
  const json& judged = sim::require(r, "time_judged", rctx);
  if (!judged.is_boolean()) rctx.fail("time_judged", "true or false");
  if (!judged.get<bool>()) {
    out.ignored.push_back(name + ": step time not judged");
    return;
  }
  const std::string plan_file = resolve_relative(path, sim::get_string(r, "plan_file", rctx));
  if (!fs::is_regular_file(plan_file)) rctx.fail("plan_file", "an existing plan file (no file '" + plan_file + "')");
  const double step_s = sim::get_positive(sim::require(r, "measured", rctx), "step_seconds", rctx.child("measured"));
  out.runs.push_back(
      MeasuredRun{unique_name(name, taken), formats::load_plan(plan_file), step_s, false, path, false, "", ""});
}

void read_runs_file(const std::string& path, bool first, MeasuredRuns& out, std::set<std::string>& taken) {
  if (!fs::is_regular_file(path)) throw sim::InputError("--runs: file '" + path + "' does not exist");
  const json j = sim::read_json_file(path);
  if (!j.is_object()) throw sim::InputError(path + ": expected a JSON object (`shardplan validate --json` output)");
  const sim::JsonContext ctx{path, ""};
  const std::string schema = sim::get_string(j, "schema", ctx);
  if (schema == kRunsSchema) {  // recorded runs: each on its own cluster
    for (auto& r : measured_from_recorded(runs_from_json(j, path).runs)) {
      r.name = unique_name(r.name, taken);
      out.runs.push_back(std::move(r));
    }
    return;
  }
  if (schema != kValidationSchema)
    ctx.fail("schema",
             std::string("\"") + kValidationSchema + "\" or \"" + kRunsSchema + "\" (got \"" + schema + "\")");
  if (first) {
    const std::string hw = sim::get_string_or(j, "hardware_file", "", ctx);
    const bool beside = sim::looks_like_path(hw) && fs::is_regular_file(resolve_relative(path, hw));
    out.hardware_file = beside ? resolve_relative(path, hw) : hw;
  }
  const json& runs = sim::require(j, "runs", ctx);
  if (!runs.is_array()) ctx.fail("runs", "an array of runs");
  for (std::size_t i = 0; i < runs.size(); ++i)
    read_run(runs[i], path, ctx.child("runs[" + std::to_string(i) + "]"), out, taken);
}

}  // namespace

MeasuredRuns load_measured_runs(const std::vector<std::string>& paths) {
  if (paths.empty()) throw sim::InputError("--runs: expected at least one validation JSON file");
  MeasuredRuns out;
  std::set<std::string> taken;
  for (std::size_t i = 0; i < paths.size(); ++i) read_runs_file(paths[i], i == 0, out, taken);
  if (out.runs.empty())
    throw sim::InputError("--runs: no run with status \"ran\" and time_judged true in " + paths.front() +
                          (paths.size() > 1 ? " and the other runs files" : ""));
  return out;
}

std::string assign_holdout(std::vector<MeasuredRun>& runs, const std::vector<std::string>& names, int free_parameters) {
  for (auto& r : runs) r.holdout = false;
  const int n = static_cast<int>(runs.size());
  const int need = std::max(1, free_parameters);
  if (!names.empty()) {
    for (const auto& name : names) {
      auto it = std::find_if(runs.begin(), runs.end(), [&](const MeasuredRun& r) { return r.name == name; });
      if (it == runs.end()) throw sim::InputError("--holdout: no usable run named '" + name + "'");
      it->holdout = true;
    }
    const auto fit = std::count_if(runs.begin(), runs.end(), [](const MeasuredRun& r) { return !r.holdout; });
    if (fit < need)
      throw sim::InputError("--holdout: leaves " + std::to_string(fit) + " fitting runs, expected at least " +
                            std::to_string(need) + " (one per free parameter)");
    return "";
  }
  std::vector<int> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return runs[a].name < runs[b].name; });
  const int held = n / 3;  // indices 2, 5, 8, ... of the sorted runs
  if (held == 0) return "no hold-out: " + std::to_string(n) + " runs (every third run in name order is held out)";
  if (n - held < need)
    return "no hold-out possible: holding out every third of " + std::to_string(n) + " runs would leave " +
           std::to_string(n - held) + " fitting runs for " + std::to_string(need) + " free parameters; fitting on all";
  for (int k = 2; k < n; k += 3) runs[order[k]].holdout = true;
  return "";
}

namespace {

// Multiplies the measured seconds per element of the op costs `which` selects.
template <class Which>
void scale_op_costs(HW& hw, double factor, Which which) {
  for (auto& by_kind : hw.device.op_costs)
    for (int k = 0; k < sim::kOpKinds; ++k) {
      if (!which(static_cast<sim::OpKind>(k))) continue;
      sim::OpCost& c = by_kind[static_cast<std::size_t>(k)];
      for (double& s : c.forward_s_per_element.efficiency) s *= factor;
      for (double& s : c.backward_s_per_element.efficiency) s *= factor;
    }
}

}  // namespace

const std::vector<ParamSpec>& calibration_parameters() {
  static const std::vector<ParamSpec> table{
      {"compute_scale",
       ParamKind::scale,
       "GEMM throughput: multiplies device.peak_TFLOPs (every precision); divides the measured attention GEMM costs",
       {"device.peak_TFLOPs.fp32", "device.peak_TFLOPs.fp16", "device.peak_TFLOPs.bf16",
        "device.op_costs.attention_gemms"},
       [](const HW&) { return 1.0; },
       [](HW& hw, double v) {
         for (double& p : hw.device.peak_flops) p *= v;
         scale_op_costs(hw, 1.0 / v, [](sim::OpKind k) { return k == sim::OpKind::attention_gemms; });
       }},
      {"fp8_compute_scale",
       ParamKind::scale,
       "FP8 GEMM throughput: multiplies device.peak_TFLOPs.fp8",
       {"device.peak_TFLOPs.fp8"},
       [](const HW&) { return 1.0; },
       [](HW& hw, double v) { hw.device.peak_fp8_flops *= v; }},
      {"memory_scale",
       ParamKind::scale,
       "memory-bound work: multiplies device.memory_bandwidth; divides the other measured op costs (device.op_costs)",
       {"device.memory_bandwidth_bytes_per_s", "device.op_costs"},
       [](const HW&) { return 1.0; },
       [](HW& hw, double v) {
         hw.device.memory_bandwidth_Bps *= v;
         scale_op_costs(hw, 1.0 / v, [](sim::OpKind k) { return k != sim::OpKind::attention_gemms; });
       }},
      {"comm_scale",
       ParamKind::scale,
       "communication: multiplies node.intra_node.bandwidth, its measured bus-bandwidth curves and network.bandwidth",
       {"node.intra_node.bandwidth_bytes_per_s", "node.intra_node.collective_busbw_bytes_per_s_by_bytes",
        "network.bandwidth_bytes_per_s"},
       [](const HW&) { return 1.0; },
       [](HW& hw, double v) {
         hw.node.intra.bandwidth_Bps *= v;
         for (auto& curve : hw.node.intra.busbw_by_bytes)
           for (double& bw : curve.efficiency) bw *= v;
         hw.network.bandwidth_Bps *= v;
       }},
      {"kernel_launch_us",
       ParamKind::microseconds,
       "fixed cost per kernel: sets device.kernel_launch",
       {"device.kernel_launch_s"},
       [](const HW& hw) { return hw.device.kernel_launch_s * 1e6; },
       [](HW& hw, double v) { hw.device.kernel_launch_s = v * 1e-6; }},
  };
  return table;
}

int parameter_index(const std::string& name) {
  const auto& t = calibration_parameters();
  for (std::size_t i = 0; i < t.size(); ++i)
    if (name == t[i].name) return static_cast<int>(i);
  return -1;
}

Params prior_params(const HW& base) {
  Params p;
  for (const auto& spec : calibration_parameters()) p.push_back(spec.prior(base));
  return p;
}

HW apply_params(const HW& base, const Params& params) {
  const auto& t = calibration_parameters();
  SHARDPLAN_CHECK(params.size() == t.size(), "one value per calibration parameter");
  HW hw = base;
  for (std::size_t i = 0; i < t.size(); ++i) t[i].apply(hw, params[i]);
  return hw;
}

double predicted_step_s(const MeasuredRun& run, const HW& base, const Params& params) {
  return predicted_step_s(run, apply_params(run.own_hardware ? run.plan.cluster.hardware : base, params));
}

double predicted_step_s(const MeasuredRun& run, const HW& hw) {
  sim::ClusterSpec cluster{hw, run.plan.cluster.nodes, run.plan.cluster.per_node()};
  sim::ParallelConfig cfg = run.plan.config;
  return sim::simulate(run.plan.model, cluster, cfg).time.step_s;
}

ErrorStats error_stats(const std::vector<double>& relative_errors) {
  std::vector<std::pair<double, std::string>> named;
  for (double e : relative_errors) named.emplace_back(e, std::string());
  const ValidationErrorStats v = abs_error_stats(named);
  return {v.count, v.mean_abs, v.median_abs, v.worst_abs};
}

namespace {

// `run` under `params`: on its own profile (recorded runs), else on `applied` = the base with them.
double predict(const MeasuredRun& run, const HW& base, const HW& applied, const Params& params) {
  return run.own_hardware ? predicted_step_s(run, base, params) : predicted_step_s(run, applied);
}

// The least-squares problem in internal coordinates u: ln(factor) for scales (so factors stay
// positive), microseconds for absolute terms; parameters not in `active` stay at `start`.
struct Fit {
  const HW* base = nullptr;
  std::vector<const MeasuredRun*> runs;  // the fitting runs
  std::vector<int> active;               // indices into calibration_parameters()
  Params start;

  [[nodiscard]] bool is_scale(std::size_t k) const {
    return calibration_parameters()[active[k]].kind == ParamKind::scale;
  }
  [[nodiscard]] Params natural(const Eigen::VectorXd& u) const {
    Params p = start;
    for (std::size_t k = 0; k < active.size(); ++k) p[active[k]] = is_scale(k) ? std::exp(u[k]) : u[k];
    return p;
  }
  [[nodiscard]] Eigen::VectorXd internal(const Params& p) const {
    Eigen::VectorXd u(active.size());
    for (std::size_t k = 0; k < active.size(); ++k) u[k] = is_scale(k) ? std::log(p[active[k]]) : p[active[k]];
    return u;
  }
  // Bounds: factors in [1e-3, 1e3], absolute terms in [0, 1e4] us.
  [[nodiscard]] double lower(std::size_t k) const { return is_scale(k) ? std::log(1e-3) : 0.0; }
  [[nodiscard]] double upper(std::size_t k) const { return is_scale(k) ? std::log(1e3) : 1e4; }
  [[nodiscard]] Eigen::VectorXd project(Eigen::VectorXd u) const {
    for (std::size_t k = 0; k < active.size(); ++k) u[k] = std::clamp(u[k], lower(k), upper(k));
    return u;
  }
  // On a bound with the descent direction pointing out of the box (gradient g of the cost).
  [[nodiscard]] bool blocked(const Eigen::VectorXd& u, const Eigen::VectorXd& g, std::size_t k) const {
    return (u[k] <= lower(k) && g[k] > 0) || (u[k] >= upper(k) && g[k] < 0);
  }
  // r_i = ln(predicted_i) - ln(measured_i): relative errors, symmetric for over/under.
  [[nodiscard]] Eigen::VectorXd residuals(const Eigen::VectorXd& u) const {
    const Params p = natural(u);
    const HW hw = apply_params(*base, p);
    Eigen::VectorXd r(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
      r[i] = std::log(predict(*runs[i], *base, hw, p)) - std::log(runs[i]->measured_step_s);
    }
    return r;
  }
  // Central differences through the real simulator (forward at a lower bound).
  [[nodiscard]] Eigen::MatrixXd jacobian(const Eigen::VectorXd& u) const {
    Eigen::MatrixXd J(runs.size(), active.size());
    for (std::size_t k = 0; k < active.size(); ++k) {
      const double h = is_scale(k) ? 1e-4 : 1e-3 * std::max(1.0, std::fabs(u[k]));
      Eigen::VectorXd lo = u, hi = u;
      hi[k] += h;
      if (is_scale(k) || u[k] - h >= 0) lo[k] -= h;
      J.col(static_cast<Eigen::Index>(k)) = (residuals(hi) - residuals(lo)) / (hi[k] - lo[k]);
    }
    return J;
  }
};

// Standard errors from the final Jacobian of the parameters off their bounds: cov = s^2 (J^T J)^-1,
// s^2 = |r|^2 / (m - n) (Nocedal & Wright ch. 10.3; the delta method turns ln-factor errors into
// factor errors). A rank-deficient J means the runs cannot separate some parameters.
void standard_errors(const Fit& f, const Eigen::VectorXd& u, CalibrationResult& res) {
  const Eigen::MatrixXd J_all = f.jacobian(u);
  std::vector<Eigen::Index> interior;
  for (std::size_t k = 0; k < f.active.size(); ++k) {
    const auto& name = res.parameters[f.active[k]].name;
    if (u[k] > f.lower(k) && u[k] < f.upper(k)) interior.push_back(static_cast<Eigen::Index>(k));
    else
      res.notes.push_back(name + ": ended on its bound " + num("%g", res.values[f.active[k]]) + " (no standard error)");
  }
  const auto m = J_all.rows(), n = static_cast<Eigen::Index>(interior.size());
  if (n == 0) return;
  Eigen::MatrixXd J(m, n), Jn(m, n);
  for (Eigen::Index k = 0; k < n; ++k) {
    J.col(k) = J_all.col(interior[k]);
    Jn.col(k) = J.col(k) / std::max(J.col(k).norm(), 1e-300);
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(Jn);
  qr.setThreshold(1e-8);
  if (qr.rank() < n) {
    res.notes.push_back("the fitting runs constrain only " + std::to_string(qr.rank()) + " combinations of " +
                        std::to_string(n) +
                        " parameters: add runs that vary compute, memory traffic, "
                        "communication and kernel count differently");
    return;
  }
  if (m <= n) return;
  const double s2 = f.residuals(u).squaredNorm() / static_cast<double>(m - n);
  const Eigen::MatrixXd cov = s2 * (J.transpose() * J).ldlt().solve(Eigen::MatrixXd::Identity(n, n));
  for (Eigen::Index k = 0; k < n; ++k) {
    const double se = std::sqrt(std::max(0.0, cov(k, k)));
    const auto kk = static_cast<std::size_t>(interior[k]);
    const int idx = f.active[kk];
    res.parameters[idx].std_error = f.is_scale(kk) ? res.values[idx] * se : se;
  }
}

std::vector<bool> asked_parameters(const CalibrationOptions& o) {
  const auto& t = calibration_parameters();
  std::vector<bool> asked(t.size(), o.parameters.empty());
  for (const auto& name : o.parameters) {
    const int i = parameter_index(name);
    if (i < 0) {
      std::string names;
      for (const auto& s : t) names += (names.empty() ? "" : ", ") + std::string(s.name);
      throw sim::InputError("--fit: unknown parameter '" + name + "' (expected some of " + names + ")");
    }
    asked[i] = true;
  }
  return asked;
}

std::vector<double> predictions(const std::vector<MeasuredRun>& runs, const HW& base, const Params& params) {
  const HW hw = apply_params(base, params);
  std::vector<double> out;
  for (const auto& r : runs) {
    try {
      out.push_back(predict(r, base, hw, params));
    } catch (const sim::InputError& e) {
      throw sim::InputError("run '" + r.name + "' of " + r.source + ": " + e.what());
    }
  }
  return out;
}

std::string describe(const CalibrationResult& res, int fit_runs) {
  std::string d = res.base.description;
  if (!d.empty()) d += " ";
  d += "Calibrated by `shardplan calibrate` (" + std::string(kMethod) + ") from " + std::to_string(fit_runs) +
       " measured runs:";
  bool any = false;
  for (const auto& p : res.parameters) {
    if (!p.identified) continue;
    d += std::string(any ? "," : "") + " " + p.name + " " + num("%.4g", p.value);
    any = true;
  }
  return d + (any ? "." : " nothing identified.");
}

void fill_runs_and_stats(const std::vector<MeasuredRun>& runs, const std::vector<double>& before,
                         const std::vector<double>& after, CalibrationResult& res) {
  std::vector<double> fb, fa, hb, ha;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunResult rr{runs[i].name, runs[i].holdout, runs[i].plan.cluster.nodes, runs[i].measured_step_s,
                       before[i],    after[i]};
    res.runs.push_back(rr);
    (rr.holdout ? hb : fb).push_back(rr.error_before());
    (rr.holdout ? ha : fa).push_back(rr.error_after());
    if (std::find(res.runs_files.begin(), res.runs_files.end(), runs[i].source) == res.runs_files.end())
      res.runs_files.push_back(runs[i].source);
  }
  res.fit_before = error_stats(fb);
  res.fit_after = error_stats(fa);
  res.holdout_before = error_stats(hb);
  res.holdout_after = error_stats(ha);
  if (hb.empty()) res.notes.push_back("no hold-out runs: the error after calibration is on the fitting runs only");
}

}  // namespace

int free_parameters(const CalibrationOptions& options) {
  const std::vector<bool> asked = asked_parameters(options);
  return static_cast<int>(std::count(asked.begin(), asked.end(), true));
}

CalibrationResult calibrate(const HW& base, const std::vector<MeasuredRun>& runs, const CalibrationOptions& options) {
  const auto& table = calibration_parameters();
  const std::vector<bool> asked = asked_parameters(options);
  Fit fit{&base, {}, {}, prior_params(base)};
  for (const auto& r : runs)
    if (!r.holdout) fit.runs.push_back(&r);
  if (fit.runs.empty()) throw sim::InputError("--holdout: every run is held out; expected at least one fitting run");
  CalibrationResult res;
  res.base = base;
  const std::vector<double> before = predictions(runs, base, fit.start);
  // Identification: a parameter no fitting run's step time depends on (a zero Jacobian column at
  // the prior) stays at its prior.
  for (std::size_t i = 0; i < table.size(); ++i)
    if (asked[i]) fit.active.push_back(static_cast<int>(i));
  const Eigen::MatrixXd J0 = fit.jacobian(fit.internal(fit.start));
  std::vector<int> identified;
  for (std::size_t k = 0; k < fit.active.size(); ++k)
    if (J0.col(static_cast<Eigen::Index>(k)).lpNorm<Eigen::Infinity>() > 1e-9) identified.push_back(fit.active[k]);
  fit.active = identified;
  res.values = fit.start;
  Eigen::VectorXd u = fit.internal(fit.start);
  if (!fit.active.empty()) {
    const LmOutcome lm = levenberg_marquardt(fit, u, options.max_iterations);
    u = lm.u;
    res.values = fit.natural(u);
    res.iterations = lm.iterations;
    res.converged = lm.converged;
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    const bool ident = std::find(identified.begin(), identified.end(), static_cast<int>(i)) != identified.end();
    res.parameters.push_back(ParamResult{table[i].name, fit.start[i], res.values[i], bool(asked[i]), ident, -1});
    if (asked[i] && !ident)
      res.notes.push_back(std::string(table[i].name) +
                          ": not identified (no fitting run's step time depends on it); "
                          "kept at its prior " +
                          num("%g", fit.start[i]));
  }
  if (!fit.active.empty()) standard_errors(fit, u, res);
  const bool multi_node =
      std::any_of(fit.runs.begin(), fit.runs.end(), [](auto* r) { return r->plan.cluster.nodes > 1; });
  if (res.parameters[parameter_index("comm_scale")].identified && !multi_node)
    res.notes.push_back("comm_scale: no fitting run spans nodes; the network bandwidth gets the intra-node factor");
  if (!fit.active.empty() && !res.converged)
    res.notes.push_back("Levenberg-Marquardt stopped after " + std::to_string(res.iterations) +
                        " iterations without converging");
  res.calibrated = apply_params(base, res.values);
  res.calibrated.name = base.name + "-calibrated";
  res.calibrated.measured = true;
  res.calibrated.description = describe(res, static_cast<int>(fit.runs.size()));
  fill_runs_and_stats(runs, before, predictions(runs, base, res.values), res);
  return res;
}

}  // namespace shardplan::calibration
