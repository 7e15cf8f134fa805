#pragma once
// The simulator's entry point: one model on one cluster with fixed LoRA settings, evaluated
// for many ParallelConfigs. `estimate` is the fast analytical screen (allocation-free, closed-
// form pipeline; a hand-given interleaved partition of unequal chunks, which has no closed form, is
// simulated); `simulate` is the full model (event-simulated pipeline, per-stage memory, time
// breakdown, trace).
#include "prediction.hpp"
#include "step_model.hpp"

namespace shardplan::simulator {

struct TrainingGoal {
  double tokens = 0;  // tokens to train on (dataset tokens x epochs); 0 = none
};

class Evaluator {
 public:
  // Resolves LoRA targets (InputError if one matches nothing) and precomputes shapes.
  Evaluator(ModelSpec model, ClusterSpec cluster, LoraConfig lora = {});

  // `cfg` must have passed validate_config with this model and cluster.
  [[nodiscard]] Estimate estimate(const ParallelConfig& cfg) const;
  // The same with a prebuilt context: the per-layer costs in `c` depend on (tp, pp, dp, ZeRO,
  // micro-batch, recompute, SP, precision) only, so a search can reuse one context while it
  // varies the schedule, virtual stages and activation offload of `*c.cfg` in place.
  [[nodiscard]] Estimate estimate(const ConfigContext& c) const;
  // `pipeline_events` false: the prediction's pipeline keeps its summaries but not every op's event
  // (2 p v m of them), and time.pp_p2p_s (the p2p share, a second pipeline without the hops) stays
  // 0: the search's finish simulates hundreds of pipelines and shows a few.
  [[nodiscard]] Prediction simulate(const ParallelConfig& cfg, const TrainingGoal& goal = {},
                                    bool pipeline_events = true) const;
  // A lower bound on estimate(c').step_s over every c' that is `*c.cfg` with another pipeline
  // schedule, up to `max_virtual_stages` chunks per stage, activation offload or recompute, for
  // `*c.cfg` with one chunk per stage, no activation offload and no recompute: the estimate's
  // makespan (m - 1/v) max_s T_s + sum_s T_s / v at the largest v (it falls with v, as
  // sum T >= max T), the p2p hops 2 (p - 1) p2p_s, no DP tail and no optimizer step. Recompute and
  // offload only add to T. The search prunes with it (planner/search.cpp).
  // With `split_backward` (a zero-bubble schedule may run: ZB1P, ZB2P, ZBV), m max_s T_s alone,
  // no hops: the ZB estimates floor there; with `bidirectional_pipeline` too (DualPipe may run),
  // m / 2 max_s (T_s + T_{p-1-s}), its busiest rank pair.
  [[nodiscard]] double step_time_lower_bound(const ConfigContext& c, int max_virtual_stages,
                                             bool split_backward = false, bool bidirectional_pipeline = false) const;

  [[nodiscard]] const ModelSpec& model() const { return mc_.model; }
  [[nodiscard]] const ClusterSpec& cluster() const { return mc_.cluster; }
  [[nodiscard]] const ModelContext& context() const { return mc_; }

 private:
  ModelContext mc_;
};

// Validate `cfg` (filling defaults) and simulate it: the one-shot path the CLI uses.
Prediction simulate(const ModelSpec& model, const ClusterSpec& cluster, ParallelConfig& cfg,
                    const TrainingGoal& goal = {});

std::string format_bytes(double bytes);  // "12.34 GiB"

}  // namespace shardplan::simulator
