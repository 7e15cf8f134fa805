// `shardplan calibrate --frameworks`: the joint fit's terms, per-framework errors before and after,
// and (--leave-one-framework-out) each framework predicted by a fit to the others' runs.
#include "calibrate_frameworks.hpp"

#include <cstdio>
#include <map>

#include "calibration/framework_fit.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::cli {

namespace cal = shardplan::calibration;

namespace {

void print_terms(const cal::FrameworkFitResult& r) {
  std::printf("%-30s %-34s %5s %9s %9s %9s\n", "term", "of", "runs", "shipped", "fitted", "std_err");
  for (const auto& t : r.terms) {
    char se[32] = "        -";
    if (t.std_error >= 0) std::snprintf(se, sizeof se, "%9.3f", t.std_error);
    std::printf("%-30s %-34s %5d %9.3f %9.3f %s\n", cal::to_string(t.kind), t.name.c_str(), t.runs, t.shipped, t.fitted,
                se);
  }
  std::printf("Levenberg-Marquardt on log step time: %d iterations, %s\n", r.iterations,
              r.converged ? "converged" : "not converged");
}

void print_by_framework(const cal::FrameworkFitResult& r) {
  std::map<std::string, std::vector<double>> before, after;
  std::vector<std::string> order;
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    const std::string& f = r.run_frameworks[i];
    if (!before.count(f)) order.push_back(f);
    before[f].push_back(r.runs[i].error_before());
    after[f].push_back(r.runs[i].error_after());
  }
  std::printf("\n%-22s %5s %10s %10s %10s\n", "framework", "runs", "mean_bef", "mean_aft", "worst_aft");
  for (const auto& f : order) {
    const cal::ErrorStats b = cal::error_stats(before[f]), a = cal::error_stats(after[f]);
    std::printf("%-22s %5d %9.1f%% %9.1f%% %9.1f%%\n", f.c_str(), a.runs, 100 * b.mean, 100 * a.mean, 100 * a.worst);
  }
  std::printf("%-22s %5d %9.1f%% %9.1f%% %9.1f%%  (median after %.1f%%)\n", "all", r.fit_after.runs,
              100 * r.fit_before.mean, 100 * r.fit_after.mean, 100 * r.fit_after.worst, 100 * r.fit_after.median);
}

void print_lofo(const std::vector<cal::FrameworkHoldout>& rows) {
  std::printf("\nleave-one-framework-out (its runs predicted at compute_efficiency 1 by a fit to the others)\n");
  std::printf("%-22s %5s %10s %10s %10s\n", "framework", "runs", "mean", "worst", "bias");
  double sum = 0;
  int n = 0;
  for (const auto& h : rows) {
    if (!h.predicted) {
      std::printf("%-22s %5d  not predicted: %s\n", h.framework.c_str(), h.runs, h.why_not.c_str());
      continue;
    }
    std::printf("%-22s %5d %9.1f%% %9.1f%% %+9.1f%%\n", h.framework.c_str(), h.runs, 100 * h.error.mean,
                100 * h.error.worst, 100 * h.bias);
    for (const auto& n : h.notes) std::printf("%-22s        (%s)\n", "", n.c_str());
    sum += h.error.mean;
    ++n;
  }
  if (n > 0) std::printf("%-22s %5s %9.1f%%\n", "mean over frameworks", "", 100 * sum / n);
}

}  // namespace

int run_framework_fit(const std::vector<cal::MeasuredRun>& runs, const FrameworkFitCli& o) {
  cal::FrameworkFitOptions opts;
  opts.max_iterations = o.max_iterations;
  opts.prior_sd = o.prior_sd;
  if (o.leave_one_framework_out) {
    print_lofo(cal::leave_one_framework_out_joint(runs, opts));
    std::printf("\n");
  }
  const cal::FrameworkFitResult r = cal::fit_frameworks(runs, opts);
  const std::string text = cal::to_json(r).dump(2) + "\n";
  simulator::write_file_atomically(o.out, text);
  if (!o.json.empty()) simulator::write_file_atomically(o.json, text);
  std::printf("calibrate --frameworks from %zu runs (prior: sd %.2f of ln compute_efficiency)\n\n", runs.size(),
              opts.prior_sd);
  print_terms(r);
  print_by_framework(r);
  for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::printf("\nwrote %s\n", o.out.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace shardplan::cli
