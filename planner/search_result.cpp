// Per-thread accumulators and the deterministic merge of the search.
#include "search_result.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "simulator/errors.hpp"
#include "stage_partition.hpp"

namespace shardplan::planner::detail {

namespace sim = shardplan::simulator;

namespace {

constexpr const char* kFeatures[] = {"pp",        "tp", "zero",        "zero3", "mics", "offload",
                                     "recompute", "sp", "interleaved", "fp8",   "cp",   "ep"};

bool has_feature(const PointKey& k, const std::string& f) {
  if (f == "pp") return k.pp > 1;
  if (f == "tp") return k.tp > 1;
  if (f == "zero") return k.zero > 0;
  if (f == "zero3") return k.zero == 3;
  if (f == "mics") return k.zero > 0 && k.shard < k.dp;
  if (f == "offload") return k.offload_optimizer || k.offload_activations;
  if (f == "recompute") return k.recompute != 0;
  if (f == "sp") return k.sp != 0;
  if (f == "interleaved") return k.schedule == static_cast<int>(sim::PipelineSchedule::interleaved);
  if (f == "fp8") return k.fp8 != static_cast<int>(sim::Fp8Recipe::none);
  if (f == "cp") return k.cp > 1;
  if (f == "ep") return k.ep > 1;
  return false;
}

// a dominates b: no worse in all three, better in one.
bool dominates(const Point& a, const Point& b) {
  const double am = a.estimate.worst_memory_bytes, bm = b.estimate.worst_memory_bytes;
  const bool no_worse = a.time_per_token <= b.time_per_token && a.usd_per_token <= b.usd_per_token && am <= bm;
  const bool better = a.time_per_token < b.time_per_token || a.usd_per_token < b.usd_per_token || am < bm;
  return no_worse && better;
}

// Whether the front would take p: none of its points dominates p or is p.
bool front_takes(const std::vector<Point>& front, const Point& p) {
  return std::none_of(front.begin(), front.end(), [&](const Point& q) { return dominates(q, p) || q.key == p.key; });
}

void insert_front(std::vector<Point>& front, const Point& p) {
  if (!front_takes(front, p)) return;
  std::erase_if(front, [&](const Point& q) { return dominates(p, q); });
  front.push_back(p);
}

auto heap_cmp = [](const Point& a, const Point& b) { return better(a, b); };  // worst on top

}  // namespace

void apply(const PointKey& k, sim::ParallelConfig& c) {
  c.tp = k.tp;
  c.pp = k.pp;
  c.dp = k.dp;
  c.zero_stage = k.zero;
  c.sharding_degree = k.shard;
  c.global_batch_size = k.gbs;
  c.micro_batch_size = k.mbs;
  c.schedule = static_cast<sim::PipelineSchedule>(k.schedule);
  c.virtual_stages = k.virtual_stages;
  c.recompute = static_cast<sim::Recompute>(k.recompute);
  c.sequence_parallel = k.sp != 0;
  c.offload_optimizer = k.offload_optimizer != 0;
  c.offload_activations = k.offload_activations != 0;
  c.precision = static_cast<sim::Precision>(k.precision);
  c.fp8 = static_cast<sim::Fp8Recipe>(k.fp8);
  c.cp = k.cp;
  c.ep = k.ep;
  c.etp = k.etp;
}

PointKey key_of(const sim::ParallelConfig& c, int nodes) {
  return PointKey{.nodes = nodes,
                  .tp = c.tp,
                  .pp = c.pp,
                  .dp = c.dp,
                  .zero = c.zero_stage,
                  .shard = c.shard_group(),
                  .gbs = c.global_batch_size,
                  .mbs = c.micro_batch_size,
                  .schedule = static_cast<int>(c.schedule),
                  .virtual_stages = c.virtual_stages,
                  .recompute = static_cast<int>(c.recompute),
                  .sp = c.sequence_parallel ? 1 : 0,
                  .offload_optimizer = c.offload_optimizer ? 1 : 0,
                  .offload_activations = c.offload_activations ? 1 : 0,
                  .precision = static_cast<int>(c.precision),
                  .fp8 = static_cast<int>(c.fp8),
                  .cp = c.cp,
                  .ep = c.ep,
                  .etp = c.expert_tp()};
}

bool known_feature(const std::string& f) {
  return std::find(std::begin(kFeatures), std::end(kFeatures), f) != std::end(kFeatures);
}

std::string feature_list() {
  std::string s = "expected one of:";
  for (const char* f : kFeatures) s += std::string(" ") + f;
  return s;
}

bool meets(const PointKey& k, const Constraints& c) {
  for (const auto& f : c.require)
    if (!has_feature(k, f)) return false;
  for (const auto& f : c.forbid)
    if (has_feature(k, f)) return false;
  return true;
}

void BlockTally::add(const Point& p, bool allowed_by_constraints, double usable) {
  ++evaluated;
  if (p.estimate.fits) {
    ++fits;
    if (allowed_by_constraints) ++allowed;
    return;
  }
  const double excess = p.estimate.worst_memory_bytes - usable;
  if (excess < min_excess || (excess == min_excess && p.key < closest)) {
    min_excess = excess;
    closest = p.key;
    node_index = p.node_index;
    have_closest = true;
  }
}

void BlockTally::pruned(long long n, double excess, const PointKey& k, int ni) {
  evaluated += n;
  if (excess < min_excess || (excess == min_excess && k < closest)) {
    min_excess = excess;
    closest = k;
    node_index = ni;
    have_closest = true;
  }
}

void BlockTally::outranked(long long n) {
  evaluated += n;
  skipped_by_bound += n;
}

void RegionAcc::merge(const RegionAcc& o) {
  evaluated += o.evaluated;
  outranked += o.outranked;
  fits += o.fits;
  allowed += o.allowed;
  price_rejected |= o.price_rejected;
  if (o.have_closest &&
      (!have_closest || o.min_excess < min_excess || (o.min_excess == min_excess && o.closest < closest))) {
    min_excess = o.min_excess;
    closest = o.closest;
    node_index = o.node_index;
    have_closest = true;
  }
}

void ThreadState::offer(const Point& p) {
  offer_front(p);
  offer_ranked(p);
}

void ThreadState::offer_front(const Point& p) { insert_front(front, p); }

void ThreadState::offer_ranked(const Point& p) {
  if (static_cast<int>(best.size()) < capacity_) {
    best.push_back(p);
    std::push_heap(best.begin(), best.end(), heap_cmp);
  } else if (better(p, best.front())) {
    std::pop_heap(best.begin(), best.end(), heap_cmp);
    best.back() = p;
    std::push_heap(best.begin(), best.end(), heap_cmp);
  }
}

bool ThreadState::would_front(const Point& p) const { return front_takes(front, p); }

bool ThreadState::would_rank(const Point& p) const {
  return static_cast<int>(best.size()) < capacity_ || better(p, best.front());
}

bool ThreadState::outranked(double score, double time_per_token, double usd_per_token, double memory) const {
  if (static_cast<int>(best.size()) < capacity_ || !(score > best.front().score)) return false;
  return std::any_of(front.begin(), front.end(), [&](const Point& q) {
    const double qm = q.estimate.worst_memory_bytes;
    const bool no_worse = q.time_per_token <= time_per_token && q.usd_per_token <= usd_per_token && qm <= memory;
    return no_worse && (q.time_per_token < time_per_token || q.usd_per_token < usd_per_token || qm < memory);
  });
}

void ThreadState::record_block(int nodes, int tp, int pp, int zero, const BlockTally& t, bool price_ok) {
  RegionAcc acc;
  acc.evaluated = t.evaluated;
  acc.fits = t.fits;
  acc.allowed = t.allowed;
  acc.price_rejected = !price_ok && t.fits > 0;
  acc.outranked = t.skipped_by_bound;
  acc.min_excess = t.min_excess;
  acc.closest = t.closest;
  acc.node_index = t.node_index;
  acc.have_closest = t.have_closest;
  const std::pair<int, int> dims[] = {{0, nodes}, {1, tp}, {2, pp}, {3, zero}};
  for (const auto& d : dims) regions[d].merge(acc);
}

double model_state_lower_bound(const sim::Evaluator& ev, const sim::ParallelConfig& cfg) {
  const sim::ConfigContext c(ev.context(), cfg);
  const auto layers = sim::layers_per_chunk(ev.model(), cfg);
  double worst = 0;
  sim::StageShape last;
  for (int s = 0; s < cfg.pp; ++s) {
    sim::StageShape shape;
    shape.stage = s;
    for (int ch = 0; ch < cfg.virtual_stages; ++ch) {
      shape.layers += layers[ch * cfg.pp + s];
      shape.dense_layers += sim::dense_layers_in_chunk(ev.model(), cfg, ch, s);
    }
    shape.embedding = s == 0;
    shape.head = s == cfg.pp - 1;
    // A middle stage shaped like the one before holds the same states (at most two shapes).
    if (s > 1 && shape.layers == last.layers && shape.dense_layers == last.dense_layers && !shape.head) continue;
    last = shape;
    worst = std::max(worst, sim::stage_memory(c, shape).device.total());
  }
  return worst;
}

int thread_count(const SearchOptions& o) {
  return o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

sim::ParallelConfig config_of(const Point& p, const sim::ModelSpec& m, const SearchSpace& space, const Constraints& c) {
  sim::ParallelConfig cfg = space.base_config(c);
  apply(p.key, cfg);
  space.complete_config(cfg);
  if (m.num_layers % cfg.pp) cfg.partition = default_split(static_cast<int>(m.num_layers), cfg.pp);
  return cfg;
}

}  // namespace shardplan::planner::detail
