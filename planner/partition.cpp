#include "partition.hpp"

// Legend: L = layers, p = in.stages (pipeline stages x model chunks), stage s holds layers [a, b),
// n_s = b - a >= 1 layers (>= 0 for the first and last with empty_edges), w = memory_weight.
//   T_s = stage_extra_time_s[s] + sum_{l in [a,b)} layer_time_s[l]
//   M_s = stage_extra_bytes[s] + sum_{l in [a,b)} (layer_state_bytes[l]
//                                                  + stage_in_flight[s] * layer_activation_bytes[l])
//   B_s = (1-w) * T_s / T0 + w * M_s / M0, the even-split ideals
//         T0 = (sum layer_time_s + sum stage_extra_time_s) / p,
//         M0 = (sum layer_state_bytes + mean(stage_in_flight) * sum layer_activation_bytes
//               + sum stage_extra_bytes) / p;  a term whose ideal is 0 contributes 0.
//   E   = sum_s (p * n_s - L)^2, the unevenness of a split (0 when every stage holds L/p).
// Objectives, compared lexicographically: speed = (max T, max M, E); memory = (max M, max T, E);
// blend = (max B, max T, max M, E); remaining ties go to the lexicographically smallest
// layers_per_stage (fewer layers on earlier stages, which keep more micro-batches in flight).
// With memory_cap_bytes > 0 every stage must have M_s <= cap.
// Method: pass k is a min-max DP over contiguous ranges (best[s][l] = min over the last stage's
// start a of max(best[s-1][a], cost(s-1, a, l)), prefix sums make cost O(1)) under the bounds
// "each stage within the optimum of every earlier objective" (relative slack 1e-12) and the cap;
// a last additive DP over suffixes minimises E under all bounds and reconstructs the split.
// Every pass is O(p * L^2).
// Reference: SageMaker model parallelism auto_partition (optimize: speed|memory, memory_weight).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "simulator/errors.hpp"

namespace shardplan::planner {
namespace {

namespace sim = shardplan::simulator;

enum class Measure { time, memory, blend };

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTieSlack = 1e-12;  // relative; absorbs rounding between equal optima

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

void require_values(const std::vector<double>& v, std::size_t n, const char* field, const char* per) {
  if (v.size() != n) {
    throw sim::InputError("partition." + std::string(field) + ": expected " + std::to_string(n) + " entries (one per " +
                          per + "), got " + std::to_string(v.size()));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i]) || v[i] < 0) {
      throw sim::InputError("partition." + std::string(field) + "[" + std::to_string(i) +
                            "]: expected a finite non-negative value, got " + num(v[i]));
    }
  }
}

void validate(const PartitionInput& in) {
  if (in.stages < 1) { throw sim::InputError("partition.stages: expected >= 1, got " + std::to_string(in.stages)); }
  const std::size_t layers = in.layer_time_s.size();
  const auto stages = static_cast<std::size_t>(in.stages);
  const std::size_t edges = in.empty_edges ? std::min<std::size_t>(stages, 2) : 0;
  if (layers < stages - edges || layers == 0) {
    throw sim::InputError("partition.layer_time_s: expected at least " + std::to_string(stages - edges) +
                          " layers (one per stage" + (edges ? std::string(" between the edges") : std::string()) +
                          "), got " + std::to_string(layers));
  }
  require_values(in.layer_time_s, layers, "layer_time_s", "layer");
  require_values(in.layer_state_bytes, layers, "layer_state_bytes", "layer");
  require_values(in.layer_activation_bytes, layers, "layer_activation_bytes", "layer");
  require_values(in.stage_extra_time_s, stages, "stage_extra_time_s", "stage");
  require_values(in.stage_extra_bytes, stages, "stage_extra_bytes", "stage");
  require_values(in.stage_in_flight, stages, "stage_in_flight", "stage");
  if (!(in.memory_weight >= 0 && in.memory_weight <= 1)) {
    throw sim::InputError("partition.memory_weight: expected a value in [0, 1], got " + num(in.memory_weight));
  }
  if (!std::isfinite(in.memory_cap_bytes) || in.memory_cap_bytes < 0) {
    throw sim::InputError("partition.memory_cap_bytes: expected a finite value >= 0 (0 = no cap), got " +
                          num(in.memory_cap_bytes));
  }
  if (in.goal != PartitionGoal::speed && in.goal != PartitionGoal::memory && in.goal != PartitionGoal::blend) {
    throw sim::InputError("partition.goal: expected speed, memory or blend");
  }
}

std::vector<double> prefix_sums(const std::vector<double>& v) {
  std::vector<double> out(v.size() + 1, 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) out[i + 1] = out[i] + v[i];
  return out;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// O(1) stage costs from prefix sums; the only place T_s, M_s and B_s are computed.
class Costs {
 public:
  explicit Costs(const PartitionInput& in)
      : in_(in),
        time_(prefix_sums(in.layer_time_s)),
        state_(prefix_sums(in.layer_state_bytes)),
        act_(prefix_sums(in.layer_activation_bytes)) {
    const double p = in.stages;
    const double t0 = (time_.back() + sum(in.stage_extra_time_s)) / p;
    const double m0 = (state_.back() + sum(in.stage_in_flight) / p * act_.back() + sum(in.stage_extra_bytes)) / p;
    time_weight_ = t0 > 0 ? (1.0 - in.memory_weight) / t0 : 0.0;
    memory_weight_ = m0 > 0 ? in.memory_weight / m0 : 0.0;
  }
  int stages() const { return in_.stages; }
  int layers() const { return static_cast<int>(in_.layer_time_s.size()); }
  // The fewest layers stage s may hold, and the fewest all stages before / after it hold together.
  int least(int s) const { return in_.empty_edges && (s == 0 || s == in_.stages - 1) ? 0 : 1; }
  int least_before(int s) const {
    int n = 0;
    for (int i = 0; i < s; ++i) n += least(i);
    return n;
  }
  int least_after(int s) const {
    int n = 0;
    for (int i = s + 1; i < in_.stages; ++i) n += least(i);
    return n;
  }
  double time(int s, int a, int b) const { return in_.stage_extra_time_s[s] + (time_[b] - time_[a]); }
  double memory(int s, int a, int b) const {
    return in_.stage_extra_bytes[s] + (state_[b] - state_[a]) + in_.stage_in_flight[s] * (act_[b] - act_[a]);
  }
  double measure(Measure m, int s, int a, int b) const {
    switch (m) {
      case Measure::time:
        return time(s, a, b);
      case Measure::memory:
        return memory(s, a, b);
      case Measure::blend:
        break;
    }
    return time_weight_ * time(s, a, b) + memory_weight_ * memory(s, a, b);
  }

 private:
  const PartitionInput& in_;
  std::vector<double> time_, state_, act_;
  double time_weight_ = 0, memory_weight_ = 0;
};

struct Bound {
  Measure measure;
  double limit;  // every stage must have measure <= limit
};

bool allowed(const Costs& c, const std::vector<Bound>& bounds, int s, int a, int b) {
  for (const Bound& bd : bounds) {
    if (c.measure(bd.measure, s, a, b) > bd.limit) return false;
  }
  return true;
}

// min over splits of max_s target(s), every stage within `bounds`; kInf when no split fits.
double minmax_pass(const Costs& c, Measure target, const std::vector<Bound>& bounds) {
  const int p = c.stages();
  const int layers = c.layers();
  std::vector<double> prev(static_cast<std::size_t>(layers) + 1, kInf);
  std::vector<double> cur(prev.size(), kInf);
  prev[0] = 0.0;
  for (int s = 0; s < p; ++s) {
    std::fill(cur.begin(), cur.end(), kInf);
    const int first = c.least_before(s), end_max = layers - c.least_after(s);
    for (int l = first + c.least(s); l <= end_max; ++l) {
      double best = kInf;
      for (int a = first; a <= l - c.least(s); ++a) {
        if (prev[a] >= best || !allowed(c, bounds, s, a, l)) continue;  // cannot improve
        best = std::min(best, std::max(prev[a], c.measure(target, s, a, l)));
      }
      cur[l] = best;
    }
    std::swap(prev, cur);
  }
  return prev[layers];
}

// The split with the least E among those within `bounds` (lexicographically smallest on ties);
// empty when none fits. Suffix DP: rest[s][a] = least E of stages s.. covering layers [a, L).
std::vector<int> even_pass(const Costs& c, const std::vector<Bound>& bounds) {
  using Dev = long long;
  constexpr Dev kNone = std::numeric_limits<Dev>::max();
  const int p = c.stages();
  const int layers = c.layers();
  const auto width = static_cast<std::size_t>(layers) + 1;
  std::vector<std::vector<Dev>> rest(p + 1, std::vector<Dev>(width, kNone));
  std::vector<std::vector<int>> next(p, std::vector<int>(width, -1));
  rest[p][layers] = 0;
  for (int s = p - 1; s >= 0; --s) {
    const int end_max = layers - c.least_after(s);
    for (int a = c.least_before(s); a <= end_max - c.least(s); ++a) {
      for (int b = a + c.least(s); b <= end_max; ++b) {  // ascending: fewest layers first
        if (rest[s + 1][b] == kNone || !allowed(c, bounds, s, a, b)) continue;
        const Dev d = static_cast<Dev>(p) * (b - a) - layers;
        if (rest[s + 1][b] + d * d < rest[s][a]) {
          rest[s][a] = rest[s + 1][b] + d * d;
          next[s][a] = b;
        }
      }
    }
  }
  if (rest[0][0] == kNone) return {};
  std::vector<int> split;
  for (int s = 0, a = 0; s < p; ++s) {
    const int b = next[s][a];
    split.push_back(b - a);
    a = b;
  }
  return split;
}

std::vector<Measure> objectives(PartitionGoal goal) {
  switch (goal) {
    case PartitionGoal::speed:
      return {Measure::time, Measure::memory};
    case PartitionGoal::memory:
      return {Measure::memory, Measure::time};
    case PartitionGoal::blend:
      break;
  }
  return {Measure::blend, Measure::time, Measure::memory};
}

PartitionResult costs_of(const Costs& c, double cap, const std::vector<int>& split) {
  PartitionResult r;
  r.feasible = true;
  r.layers_per_stage = split;
  int a = 0;
  for (int s = 0; s < c.stages(); ++s) {
    const int b = a + split[s];
    r.stage_time_s.push_back(c.time(s, a, b));
    r.stage_bytes.push_back(c.memory(s, a, b));
    r.max_stage_time_s = std::max(r.max_stage_time_s, r.stage_time_s.back());
    r.max_stage_bytes = std::max(r.max_stage_bytes, r.stage_bytes.back());
    if (cap > 0 && r.stage_bytes.back() > cap && r.feasible) {
      r.feasible = false;
      r.reason =
          "memory_cap_bytes: stage " + std::to_string(s) + " needs " + gib(r.stage_bytes.back()) + " > cap " + gib(cap);
    }
    a = b;
  }
  return r;
}

}  // namespace

PartitionResult auto_partition(const PartitionInput& in) {
  validate(in);
  const Costs c(in);
  std::vector<Bound> bounds;
  if (in.memory_cap_bytes > 0) {
    const double least = minmax_pass(c, Measure::memory, bounds);
    if (least > in.memory_cap_bytes) {
      PartitionResult r;
      r.reason = "memory_cap_bytes: no split fits; smallest achievable max stage memory is " + gib(least) + " > cap " +
                 gib(in.memory_cap_bytes);
      return r;
    }
    bounds.push_back({Measure::memory, in.memory_cap_bytes});
  }
  for (Measure m : objectives(in.goal)) {
    const double best = minmax_pass(c, m, bounds);
    SHARDPLAN_CHECK(best < kInf, "auto_partition: an earlier optimum admits no split");
    bounds.push_back({m, best + kTieSlack * std::abs(best)});
  }
  const std::vector<int> split = even_pass(c, bounds);
  SHARDPLAN_CHECK(!split.empty(), "auto_partition: the optima admit no split");
  return costs_of(c, in.memory_cap_bytes, split);
}

PartitionResult evaluate_partition(const PartitionInput& in, const std::vector<int>& layers_per_stage) {
  validate(in);
  if (layers_per_stage.size() != static_cast<std::size_t>(in.stages)) {
    throw sim::InputError("partition.layers_per_stage: expected " + std::to_string(in.stages) +
                          " entries (one per stage), got " + std::to_string(layers_per_stage.size()));
  }
  long long total = 0;
  const Costs costs(in);
  for (std::size_t s = 0; s < layers_per_stage.size(); ++s) {
    const int least = costs.least(static_cast<int>(s));
    if (layers_per_stage[s] < least) {
      throw sim::InputError("partition.layers_per_stage[" + std::to_string(s) +
                            "]: expected >= " + std::to_string(least) + " layer" + (least == 1 ? "" : "s") + ", got " +
                            std::to_string(layers_per_stage[s]));
    }
    total += layers_per_stage[s];
  }
  if (total != static_cast<long long>(in.layer_time_s.size())) {
    throw sim::InputError("partition.layers_per_stage: expected entries summing to " +
                          std::to_string(in.layer_time_s.size()) + " layers, got " + std::to_string(total));
  }
  return costs_of(costs, in.memory_cap_bytes, layers_per_stage);
}

}  // namespace shardplan::planner
