// The deterministic end of a search: merge per-thread results, re-score the top candidates with
// the full simulation, build the Pareto front and the rejected-region explanations.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>

#include "framework_space.hpp"
#include "frameworks/apply.hpp"
#include "parallel_map.hpp"
#include "search_result.hpp"
#include "simulator/errors.hpp"
#include "stage_partition.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;
using detail::Point;

namespace {

std::string fmt_gib(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

// Ties go to the configuration an expert picks: no offload, a lower ZeRO stage, fewer pipeline
// stages, no recompute, less model parallelism, fewer features. Lower is simpler.
std::array<int, 8> complexity(const sim::ParallelConfig& c) {
  return {int(c.offload_optimizer) + int(c.offload_activations),
          c.zero_stage,
          c.pp,
          c.recompute == sim::Recompute::none ? 0 : 1,
          c.virtual_stages,
          c.tp * c.cp * c.ep,
          int(c.uses_fp8()) + int(c.tp_comm_overlap) + int(c.fp8_param_gather),
          int(!c.partition.empty())};
}

bool same_behaviour(const Ranked& a, const Ranked& b) {
  const auto close = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)); };
  return a.candidate.cluster.nodes == b.candidate.cluster.nodes &&
         a.candidate.cluster.hardware.name == b.candidate.cluster.hardware.name &&
         close(a.prediction.time.step_s, b.prediction.time.step_s) &&
         close(a.prediction.worst.total(), b.prediction.worst.total()) && close(a.score, b.score);
}

// Sorted rows whose predictions agree fold into the first (the simplest of them).
std::vector<Ranked> fold_equivalents(std::vector<Ranked> sorted) {
  std::vector<Ranked> out;
  for (auto& r : sorted) {
    auto same = std::find_if(out.begin(), out.end(), [&](const Ranked& k) { return same_behaviour(k, r); });
    if (same == out.end()) out.push_back(std::move(r));
    else same->equivalents.push_back(r.candidate.key);
  }
  return out;
}

// One screened point through the full simulation (and the auto-partition where it helps): its
// table row, or nothing when it does not fit or no framework runs it.
std::optional<Ranked> rescore_point(const sim::ModelSpec& model, const std::vector<sim::Evaluator>& evaluators,
                                    const SearchSpace& space, const Constraints& c, const SearchOptions& o,
                                    const Point& p) {
  const sim::Evaluator& ev = evaluators[p.node_index];
  sim::ParallelConfig cfg = detail::config_of(p, model, space, c);
  sim::validate_config(model, ev.cluster(), cfg);
  sim::Prediction pred = ev.simulate(cfg, sim::TrainingGoal{o.train_tokens}, false);  // events for the rows kept
  // Auto-partition: keep the DP's layer split when the full simulation agrees it is better.
  // With a framework that runs embedding-only and head-only chunks, the split may leave the edges empty.
  const bool empty_edges = c.framework && c.framework->runs.embedding_only_chunks;
  if (auto part = choose_partition(ev, cfg, PartitionGoal::speed, 0.5, empty_edges); part && *part != cfg.partition) {
    sim::ParallelConfig alt = cfg;
    alt.partition = *part;
    if (std::all_of(part->begin(), part->end(), [&](int l) { return l == part->front(); })) alt.partition.clear();
    sim::Prediction alt_pred = ev.simulate(alt, sim::TrainingGoal{o.train_tokens}, false);
    const bool runs = !c.framework || !frameworks::why_not(*c.framework, alt, ev.cluster());
    if (runs && alt_pred.feasible && (!pred.feasible || alt_pred.time.step_s < pred.time.step_s)) {
      cfg = std::move(alt);
      pred = std::move(alt_pred);
    }
  }
  if (!pred.feasible) return std::nullopt;
  const double price = ev.cluster().hardware.price.usd_per_hour * ev.cluster().nodes;
  Candidate cand{ev.cluster(),
                 cfg,
                 p.estimate,
                 objective_score(o.objective, pred.tokens_per_s, price, pred.worst.total(), pred.goodput.goodput),
                 price / 3600.0 / pred.tokens_per_s,
                 describe(cfg, ev.cluster().nodes)};
  std::vector<std::string> runs_on =
      c.framework ? std::vector<std::string>{c.framework->name} : frameworks_running(cfg, ev.cluster());
  if (runs_on.empty())
    return std::nullopt;  // no framework runs it (plan --framework shardrun shows what shardrun runs)
  const double score = cand.score;
  return Ranked{std::move(cand), std::move(pred), score, {}, std::move(runs_on)};
}

std::vector<Ranked> rescore(const sim::ModelSpec& model, const std::vector<sim::Evaluator>& evaluators,
                            const SearchSpace& space, const Constraints& c, const SearchOptions& o,
                            const std::vector<Point>& points) {
  auto rows = detail::parallel_map<std::optional<Ranked>>(points.size(), detail::thread_count(o), [&](std::size_t i) {
    return rescore_point(model, evaluators, space, c, o, points[i]);
  });
  std::vector<Ranked> ranked;
  for (auto& r : rows)
    if (r) ranked.push_back(std::move(*r));
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.score != b.score) return a.score < b.score;
    if (complexity(a.candidate.config) != complexity(b.candidate.config))
      return complexity(a.candidate.config) < complexity(b.candidate.config);
    return detail::key_of(a.candidate.config, a.candidate.cluster.nodes) <
           detail::key_of(b.candidate.config, b.candidate.cluster.nodes);
  });
  ranked = fold_equivalents(std::move(ranked));
  if (static_cast<int>(ranked.size()) > o.top_k) ranked.resize(o.top_k);
  // The rows shown keep their pipelines' events (the GUI's Gantt chart): simulated again with them.
  detail::parallel_map<int>(ranked.size(), detail::thread_count(o), [&](std::size_t i) {
    Ranked& row = ranked[i];
    for (const auto& ev : evaluators)
      if (ev.cluster().nodes == row.candidate.cluster.nodes &&
          ev.cluster().hardware.name == row.candidate.cluster.hardware.name) {
        row.prediction = ev.simulate(row.candidate.config, sim::TrainingGoal{o.train_tokens});
        break;
      }
    return 0;
  });
  return ranked;
}

std::string region_name(int dim, int value) {
  static const char* names[] = {"nodes", "tp", "pp", "zero"};
  return std::string(names[dim]) + "=" + std::to_string(value);
}

std::string region_reason(const sim::ModelSpec& model, const std::vector<sim::Evaluator>& evaluators,
                          const SearchSpace& space, const Constraints& c, const std::string& name,
                          const detail::RegionAcc& r) {
  if (r.fits == 0 && r.have_closest) {
    Point p;
    p.key = r.closest;
    p.node_index = r.node_index;
    const sim::Evaluator& ev = evaluators[p.node_index];
    sim::ParallelConfig cfg = detail::config_of(p, model, space, c);
    std::string detail_line;
    try {
      sim::validate_config(model, ev.cluster(), cfg);
      detail_line = ev.simulate(cfg).infeasible_reason;
    } catch (const sim::InputError& e) { detail_line = e.what(); }
    const double usable = ev.cluster().hardware.device.memory_bytes * (1.0 - c.memory_headroom);
    if (r.min_excess > 0)
      return "all " + name + " configurations exceed the " + fmt_gib(usable) +
             " usable per device by >= " + fmt_gib(r.min_excess) + "; closest (" + describe(cfg, ev.cluster().nodes) +
             "): " + detail_line;
    return "no " + name + " configuration fits; closest (" + describe(cfg, ev.cluster().nodes) + "): " + detail_line;
  }
  if (r.price_rejected) return "all " + name + " configurations that fit exceed --max-usd-per-hour";
  if (c.framework)
    return "all " + name + " configurations that fit are excluded by --require/--forbid, or " + c.framework->display +
           " cannot run them";
  return "all " + name + " configurations that fit are excluded by --require/--forbid";
}

}  // namespace

double objective_score(Objective o, double tokens_per_s, double usd_per_hour, double worst_memory_bytes,
                       double goodput) {
  switch (o) {
    case Objective::throughput:
      return 1.0 / tokens_per_s;
    case Objective::time_to_train:
      return 1.0 / (tokens_per_s * goodput);
    case Objective::cost:
      return usd_per_hour / 3600.0 / (tokens_per_s * goodput);
    case Objective::memory:
      return worst_memory_bytes + 1e-3 / tokens_per_s;  // tie: faster
  }
  return 0;
}

std::string describe(const sim::ParallelConfig& c, int nodes) {
  std::string s = "nodes=" + std::to_string(nodes) + " tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp) +
                  " dp=" + std::to_string(c.dp);
  if (c.cp > 1) s += " cp=" + std::to_string(c.cp) + (c.cp_kind == sim::CpKind::all_to_all ? "(a2a)" : "");
  if (c.ep > 1 || c.expert_tp() != c.tp) s += " ep=" + std::to_string(c.ep) + " etp=" + std::to_string(c.expert_tp());
  s += " zero=" + std::to_string(c.zero_stage);
  if (c.zero_stage > 0 && c.shard_group() != c.dp) s += " shard=" + std::to_string(c.shard_group());
  s += " mbs=" + std::to_string(c.micro_batch_size) + " gbs=" + std::to_string(c.global_batch_size);
  if (c.pp > 1) {
    s += std::string(" ") + sim::to_string(c.schedule);
    if (c.virtual_stages > 1) s += " v=" + std::to_string(c.virtual_stages);
  }
  s += std::string(" recompute=") + sim::to_string(c.recompute);
  if (c.sequence_parallel) s += c.tp_comm_overlap ? " sp+overlap" : " sp";
  if (c.offload_optimizer) s += " offload-optimizer";
  if (c.offload_activations) s += " offload-activations";
  s += std::string(" ") + sim::to_string(c.precision);
  if (c.casts_weights()) s += " autocast";
  if (c.uses_fp8()) s += std::string(" fp8=") + sim::to_string(c.fp8);
  if (c.fp8_param_gather) s += " fp8-param-gather";
  if (c.attention != sim::AttentionKind::flash) s += std::string(" ") + sim::to_string(c.attention) + "-attention";
  if (c.fusion != sim::Fusion::eager) s += std::string(" ") + sim::to_string(c.fusion) + "-fusion";
  if (c.fp32_grad_accum()) s += " fp32-grad-accum";
  if (c.packed_document_tokens > 0) s += " packed-docs-" + std::to_string(c.packed_document_tokens);
  return s;
}

// The knobs two configurations differ in, as "tp 8->4 pp 4->2".
std::string knob_differences(const sim::ParallelConfig& a, const sim::ParallelConfig& b) {
  std::string out;
  auto knob = [&](const char* name, long long x, long long y) {
    if (x != y) out += std::string(out.empty() ? "" : " ") + name + " " + std::to_string(x) + "->" + std::to_string(y);
  };
  knob("tp", a.tp, b.tp);
  knob("pp", a.pp, b.pp);
  knob("dp", a.dp, b.dp);
  knob("cp", a.cp, b.cp);
  knob("ep", a.ep, b.ep);
  knob("zero", a.zero_stage, b.zero_stage);
  knob("shard", a.shard_group(), b.shard_group());
  knob("recompute_layers", a.recompute_num_layers, b.recompute_num_layers);
  knob("mbs", a.micro_batch_size, b.micro_batch_size);
  knob("v", a.virtual_stages, b.virtual_stages);
  if (a.pp > 1 && b.pp > 1 && a.schedule != b.schedule)
    out += std::string(out.empty() ? "" : " ") + "schedule " + sim::to_string(a.schedule) + "->" +
           sim::to_string(b.schedule);
  knob("sp", a.sequence_parallel, b.sequence_parallel);
  knob("offload", a.offload_optimizer + a.offload_activations, b.offload_optimizer + b.offload_activations);
  if (a.recompute != b.recompute)
    out += std::string(out.empty() ? "" : " ") + "recompute " + sim::to_string(a.recompute) + "->" +
           sim::to_string(b.recompute);
  return out;
}

std::vector<Candidate> non_dominated(std::vector<Candidate> all) {
  auto dominates = [](const Candidate& a, const Candidate& b) {
    const double ta = 1 / a.estimate.tokens_per_s, tb = 1 / b.estimate.tokens_per_s;
    const bool no_worse = ta <= tb && a.usd_per_token <= b.usd_per_token &&
                          a.estimate.worst_memory_bytes <= b.estimate.worst_memory_bytes;
    return no_worse && (ta < tb || a.usd_per_token < b.usd_per_token ||
                        a.estimate.worst_memory_bytes < b.estimate.worst_memory_bytes);
  };
  // Fastest first; among points predicted alike, the simplest first, and the others left out.
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.estimate.tokens_per_s != b.estimate.tokens_per_s) return a.estimate.tokens_per_s > b.estimate.tokens_per_s;
    if (a.estimate.worst_memory_bytes != b.estimate.worst_memory_bytes)
      return a.estimate.worst_memory_bytes < b.estimate.worst_memory_bytes;
    if (complexity(a.config) != complexity(b.config)) return complexity(a.config) < complexity(b.config);
    return a.key < b.key;
  });
  auto alike = [](const Candidate& a, const Candidate& b) {
    return a.estimate.tokens_per_s == b.estimate.tokens_per_s &&
           a.estimate.worst_memory_bytes == b.estimate.worst_memory_bytes && a.usd_per_token == b.usd_per_token;
  };
  std::vector<Candidate> out;
  for (const auto& a : all) {
    const bool beaten = std::any_of(all.begin(), all.end(), [&](const Candidate& b) { return dominates(b, a); });
    const bool repeat = std::any_of(out.begin(), out.end(), [&](const Candidate& k) { return alike(k, a); });
    if (!beaten && !repeat) out.push_back(a);
  }
  return out;
}

namespace detail {

// The estimate's front re-judged by the full simulation the table uses, with the table's rows
// added: no front point is dominated by a ranked row (time and cost per token, memory).
std::vector<Candidate> final_front(const sim::ModelSpec& model, const std::vector<sim::Evaluator>& evaluators,
                                   const SearchSpace& space, const Constraints& c, const SearchOptions& o,
                                   const std::vector<Point>& front, const std::vector<Ranked>& ranked) {
  std::vector<Candidate> all;
  auto with_prediction = [](Candidate cand, const sim::Prediction& pred) {
    cand.estimate.step_s = pred.time.step_s;
    cand.estimate.tokens_per_s = pred.tokens_per_s;
    cand.estimate.worst_memory_bytes = pred.worst.total();
    cand.estimate.mfu = pred.mfu;
    cand.estimate.fits = pred.feasible;
    const double price = cand.cluster.hardware.price.usd_per_hour * cand.cluster.nodes;
    cand.usd_per_token = price / 3600.0 / pred.tokens_per_s;
    return cand;
  };
  auto judged = parallel_map<std::optional<Candidate>>(front.size(), thread_count(o), [&](std::size_t i) {
    const Point& p = front[i];
    const sim::Evaluator& ev = evaluators[p.node_index];
    sim::ParallelConfig cfg = config_of(p, model, space, c);
    const sim::Prediction pred = ev.simulate(cfg, sim::TrainingGoal{o.train_tokens}, false);
    if (!pred.feasible) return std::optional<Candidate>();
    return std::optional<Candidate>(
        with_prediction({ev.cluster(), cfg, p.estimate, p.score, 0, describe(cfg, ev.cluster().nodes)}, pred));
  });
  for (auto& cand : judged)
    if (cand) all.push_back(std::move(*cand));
  for (const auto& x : ranked) all.push_back(with_prediction(x.candidate, x.prediction));
  return non_dominated(std::move(all));
}

SearchResult finish(const sim::ModelSpec& model, const std::vector<sim::Evaluator>& evaluators,
                    const SearchSpace& space, const Constraints& c, const SearchOptions& o,
                    std::vector<ThreadState>& states) {
  SearchResult r;
  std::vector<Point> best, front;
  std::map<std::pair<int, int>, RegionAcc> regions;
  for (auto& st : states) {
    best.insert(best.end(), st.best.begin(), st.best.end());
    front.insert(front.end(), st.front.begin(), st.front.end());
    for (const auto& [k, acc] : st.regions) regions[k].merge(acc);
  }
  std::sort(best.begin(), best.end(), better);
  best.erase(std::unique(best.begin(), best.end(), [](const Point& a, const Point& b) { return a.key == b.key; }),
             best.end());
  const std::size_t keep = static_cast<std::size_t>(std::max(o.top_k * 4, 32));
  if (best.size() > keep) best.resize(keep);
  r.ranked = rescore(model, evaluators, space, c, o, best);

  // Pareto front: recomputed from the union in key order, so thread count cannot change it.
  std::sort(front.begin(), front.end(), [](const Point& a, const Point& b) { return a.key < b.key; });
  ThreadState merged(1);
  for (const auto& p : front) merged.offer(p);
  std::sort(merged.front.begin(), merged.front.end(), [](const Point& a, const Point& b) {
    if (a.time_per_token != b.time_per_token) return a.time_per_token < b.time_per_token;
    return a.key < b.key;
  });
  r.pareto = final_front(model, evaluators, space, c, o, merged.front, r.ranked);

  for (const auto& [k, acc] : regions) {
    if (acc.evaluated == 0 || acc.allowed > 0 || acc.outranked > 0) continue;
    const std::string name = region_name(k.first, k.second);
    r.rejected.push_back(
        {name, acc.evaluated, acc.evaluated - acc.allowed, region_reason(model, evaluators, space, c, name, acc)});
  }
  return r;
}

}  // namespace detail

std::string why_not(const sim::ModelSpec& model, const sim::ClusterSpec& cluster, sim::ParallelConfig cfg,
                    const SearchResult& result, const Constraints& c, Objective objective) {
  try {
    sim::validate_config(model, cluster, cfg);
  } catch (const sim::InputError& e) { return std::string("invalid: ") + e.what(); }
  const sim::Prediction p = sim::simulate(model, cluster, cfg);
  const std::string name = describe(cfg, cluster.nodes);
  if (!p.feasible) return name + ": does not fit: " + p.infeasible_reason;
  const double price = cluster.hardware.price.usd_per_hour * cluster.nodes;
  if (c.max_usd_per_hour > 0 && price > c.max_usd_per_hour) return name + ": costs more than --max-usd-per-hour";
  if (!detail::meets(detail::key_of(cfg, cluster.nodes), c)) return name + ": excluded by --require/--forbid";
  if (c.framework)
    if (const auto gap = frameworks::why_not(*c.framework, cfg, cluster)) return name + ": " + *gap;
  if (result.ranked.empty()) return name + ": fits, and the search found nothing feasible to compare with";
  const Ranked& best = result.ranked.front();
  const double score = objective_score(objective, p.tokens_per_s, price, p.worst.total(), p.goodput.goodput);
  if (score <= best.score) return name + ": is as good as the plan (" + best.candidate.key + ")";
  const auto& a = p.time;
  const auto& b = best.prediction.time;
  const std::pair<double, const char*> diffs[] = {
      {a.forward_compute_s + a.backward_compute_s - b.forward_compute_s - b.backward_compute_s, "compute"},
      {a.recompute_s - b.recompute_s, "recompute"},
      {a.tp_comm_s - b.tp_comm_s, "TP communication"},
      {a.cp_comm_s - b.cp_comm_s, "context-parallel communication"},
      {a.ep_comm_s - b.ep_comm_s, "expert-parallel all-to-all"},
      {a.pipeline_bubble_s - b.pipeline_bubble_s, "pipeline bubble"},
      {a.dp_exposed_comm_s - b.dp_exposed_comm_s, "exposed DP/ZeRO communication"},
      {a.offload_exposed_s - b.offload_exposed_s, "offload transfers"},
      {a.optimizer_s - b.optimizer_s, "optimizer step"}};
  const auto worst = *std::max_element(std::begin(diffs), std::end(diffs));
  char buf[256];
  std::snprintf(buf, sizeof buf, ": fits, but %.0f%% worse by %s than the plan; most of the gap: %s (%+.3f s/step)",
                100.0 * (score / best.score - 1.0), to_string(objective), worst.second, worst.first);
  const std::string knobs = knob_differences(cfg, best.candidate.config);
  return name + buf + (knobs.empty() ? std::string() : "; the plan changes " + knobs);
}

}  // namespace shardplan::planner
