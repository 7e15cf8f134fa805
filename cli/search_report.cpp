// Human and JSON output of `shardplan plan`.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "planner/space_parse.hpp"
#include "search_report.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;

namespace {

std::string f(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string days_or_hours(double s) { return s >= 2 * 86400 ? f("%.1f d", s / 86400) : f("%.1f h", s / 3600); }

}  // namespace

nlohmann::json search_json(const pl::SearchResult& r, const std::optional<std::string>& why) {
  nlohmann::json j;
  j["shardplan_version"] = sim::version();
  j["ranked"] = nlohmann::json::array();
  for (const auto& x : r.ranked) {
    nlohmann::json e = sim::to_json(x.prediction, false);
    e["config"] = sim::to_json(x.candidate.config);
    e["nodes"] = x.candidate.cluster.nodes;
    e["description"] = x.candidate.key;
    e["score"] = x.score;
    e["usd_per_token"] = x.candidate.usd_per_token;
    e["equivalents"] = x.equivalents;  // predicted identically, folded into this row
    e["frameworks"] = x.frameworks;    // the frameworks that run it
    j["ranked"].push_back(std::move(e));
  }
  j["pareto"] = nlohmann::json::array();
  for (const auto& c : r.pareto)
    j["pareto"].push_back({{"description", c.key},
                           {"nodes", c.cluster.nodes},
                           {"config", sim::to_json(c.config)},
                           {"step_seconds", c.estimate.step_s},
                           {"tokens_per_second", c.estimate.tokens_per_s},
                           {"usd_per_token", c.usd_per_token},
                           {"worst_memory_bytes", c.estimate.worst_memory_bytes}});
  j["rejected"] = nlohmann::json::array();
  for (const auto& g : r.rejected)
    j["rejected"].push_back({{"region", g.region}, {"evaluated", g.evaluated}, {"reason", g.reason}});
  j["stats"] = {{"evaluated", r.evaluated},    {"pruned", r.pruned}, {"outranked", r.outranked},
                {"considered", r.considered},  {"unrun", r.unrun},   {"seconds", r.seconds},
                {"interrupted", r.interrupted}};
  if (why) j["why_not"] = *why;
  return j;
}

void print_search(std::ostream& out, const sim::ModelSpec& model, const pl::SearchResult& r, const pl::SearchOptions& o,
                  const std::optional<std::string>& why, const std::string& out_path) {
  out << "shardplan plan: " << model.name << ", objective " << pl::to_string(o.objective);
  if (!r.ranked.empty()) out << ", " << sim::to_string(r.ranked.front().candidate.config.attention) << " attention";
  out << "\n";
  out << "considered " << r.considered << " configurations (" << r.evaluated << " evaluated, " << r.pruned
      << " pruned by the model-state bound, " << r.outranked << " by the step-time bound) in " << f("%.2f", r.seconds)
      << " s" << (r.interrupted ? " -- interrupted, best so far" : "") << "\n\n";
  if (r.ranked.empty() && r.unrun > 0) {
    out << "no configuration a framework runs fits the constraints: " << r.unrun
        << " that fit are run by no framework in shardplan's tables (their schedule, precision or layout);"
           " --framework NAME searches what that framework runs\n";
  } else if (r.ranked.empty()) {
    out << "no configuration fits the constraints\n";
  } else {
    out << " #  tokens/s     step   mem/dev    MFU   USD/h goodput";
    if (o.train_tokens > 0) out << "   train    cost";
    out << "  configuration\n";
    int i = 1;
    for (const auto& x : r.ranked) {
      const auto& p = x.prediction;
      out << f("%2.0f", i++) << f("%10.0f", p.tokens_per_s) << f("%8.2fs", p.time.step_s)
          << f("%7.1fGiB", p.worst.total() / (1024.0 * 1024 * 1024)) << f("%6.1f%%", 100 * p.mfu)
          << f("%8.2f", p.price_usd_per_hour) << f("%7.1f%%", 100 * p.goodput.goodput);
      // Time and cost to train include the expected failures (what the objectives rank by).
      if (o.train_tokens > 0 && p.train_time_with_failures_s) {
        const std::string t = days_or_hours(*p.train_time_with_failures_s);
        out << std::string(8 - std::min<std::size_t>(8, t.size()), ' ') << t
            << (p.train_cost_with_failures_usd ? f("%8.0f", *p.train_cost_with_failures_usd) : std::string("       -"));
      }
      out << "  " << x.candidate.key << "\n";
      for (const auto& same : x.equivalents) out << "      (the same prediction: " << same << ")\n";
      std::string runs_on;
      for (const auto& f : x.frameworks) runs_on += (runs_on.empty() ? "" : ", ") + f;
      out << "      runs on: " << runs_on << "\n";
    }
  }
  if (std::any_of(r.ranked.begin(), r.ranked.end(), [](const pl::Ranked& x) { return x.candidate.config.uses_fp8(); }))
    out << "MFU: model FLOP/s over the 16-bit peak, as the field reports it; an FP8 row's fraction of the FP8 "
           "peak its GEMMs run at is its gemm_peak_fraction (--json)\n";
  std::vector<std::string> uncalibrated;  // the profiles of ranked rows whose terms are not fitted
  for (const auto& x : r.ranked)
    if (!x.prediction.hardware_calibrated &&
        std::find(uncalibrated.begin(), uncalibrated.end(), x.prediction.hardware_name) == uncalibrated.end()) {
      uncalibrated.push_back(x.prediction.hardware_name);
      out << "uncalibrated profile " << x.prediction.hardware_name << ": " << x.prediction.hardware_calibration_rule
          << "\n";
    }
  if (!r.pareto.empty()) {
    out << "\nPareto front (time per token, cost per token, memory): " << r.pareto.size() << " configurations\n";
    const std::size_t show = std::min<std::size_t>(r.pareto.size(), 5);
    for (std::size_t i = 0; i < show; ++i) {
      const auto& c = r.pareto[i];
      out << "  " << f("%10.0f tok/s", c.estimate.tokens_per_s)
          << f("  %6.1f GiB", c.estimate.worst_memory_bytes / (1024.0 * 1024 * 1024)) << "  " << c.key << "\n";
    }
  }
  if (!r.rejected.empty()) {
    out << "\nwhy not:\n";
    for (const auto& g : r.rejected) out << "  " << g.reason << "\n";
  }
  if (why) out << "\nwhy not " << *why << "\n";
  if (!out_path.empty() && !r.ranked.empty()) out << "\nplan written to " << out_path << "\n";
}

}  // namespace shardplan::cli
