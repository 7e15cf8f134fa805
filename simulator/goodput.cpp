#include "goodput.hpp"

#include <algorithm>
#include <cmath>

namespace shardplan::simulator {

// Young (1974): minimising the first-order waste δ/τ + τ/(2M) gives τ = sqrt(2 δ M).
double young_interval(double checkpoint_s, double mtbf_s) { return std::sqrt(2.0 * checkpoint_s * mtbf_s); }

// Daly (2006), higher-order estimate of the optimum of the complete model below.
double daly_interval(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2.0 * mtbf_s) return mtbf_s;
  const double x = checkpoint_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - checkpoint_s;
}

// Daly (2006), the complete model with exponential failures: each segment of τ compute plus δ
// checkpoint succeeds after an expected M·e^{R/M}·(e^{(τ+δ)/M} − 1) of wall time; T_s/τ segments.
double expected_wall_time(double solve_s, double interval_s, double checkpoint_s, double restart_s, double mtbf_s) {
  return mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((interval_s + checkpoint_s) / mtbf_s) * solve_s /
         interval_s;
}

double goodput(double interval_s, double checkpoint_s, double restart_s, double mtbf_s) {
  if (!std::isfinite(mtbf_s)) return interval_s / (interval_s + checkpoint_s);
  return 1.0 / expected_wall_time(1.0, interval_s, checkpoint_s, restart_s, mtbf_s);
}

// Young (1974): checkpoint overhead plus, at 1/M failures per second, the restart and half an
// interval of rework each.
double first_order_waste(double interval_s, double checkpoint_s, double restart_s, double mtbf_s) {
  return checkpoint_s / interval_s + (restart_s + interval_s / 2.0) / mtbf_s;
}

double waste_per_failure(double interval_s, double checkpoint_s, double restart_s) {
  return restart_s + (interval_s + checkpoint_s) / 2.0;
}

double checkpoint_bytes(double trainable_parameters, const ParallelConfig& cfg) {
  const double weight = cfg.fp32_weights() ? 4.0 : 2.0;
  const double optimizer = cfg.fp32_weights() ? 8.0 : 12.0;  // (master +) m + v, fp32
  return trainable_parameters * (weight + optimizer);
}

GoodputPrediction predict_goodput(const ClusterSpec& cluster, const ParallelConfig& cfg, double trainable_parameters,
                                  double step_s) {
  const ResilienceProfile& r = cluster.hardware.resilience;
  GoodputPrediction g;
  g.job_mtbf_s = r.node_mtbf_s / std::max(1, cluster.nodes);
  g.checkpoint_bytes = checkpoint_bytes(trainable_parameters, cfg);
  g.checkpoint_writers = cfg.tp * cfg.pp * (cfg.zero_stage >= 1 ? std::max(1, cfg.dense_shard_group()) : 1);
  const int per_node = std::max(1, cluster.per_node());
  const int writing_nodes = std::clamp((g.checkpoint_writers + per_node - 1) / per_node, 1, std::max(1, cluster.nodes));
  g.checkpoint_write_s = g.checkpoint_bytes / (writing_nodes * r.checkpoint_write_Bps);
  g.restart_s = r.restart_s;
  g.young_interval_s = young_interval(g.checkpoint_write_s, g.job_mtbf_s);
  g.daly_interval_s = daly_interval(g.checkpoint_write_s, g.job_mtbf_s);
  const double steps = step_s > 0 ? std::round(g.daly_interval_s / step_s) : 1.0;
  g.interval_steps = static_cast<int64_t>(std::clamp(steps, 1.0, 1e15));
  g.interval_s = static_cast<double>(g.interval_steps) * step_s;
  g.waste_per_failure_s = waste_per_failure(g.interval_s, g.checkpoint_write_s, g.restart_s);
  g.goodput = g.interval_s > 0 ? goodput(g.interval_s, g.checkpoint_write_s, g.restart_s, g.job_mtbf_s) : 0.0;
  return g;
}

}  // namespace shardplan::simulator
