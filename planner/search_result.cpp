// Per-thread accumulators and the deterministic merge of the search.
#include "search_result.hpp"

#include <algorithm>
#include <cstdio>

#include "simulator/errors.hpp"
#include "stage_partition.hpp"

namespace shardplan::planner::detail {

namespace sim = shardplan::simulator;

namespace {

constexpr const char* kFeatures[] = {"pp",        "tp", "zero", "zero3", "mics", "offload", "recompute", "sp",
                                     "interleaved", "fp8", "cp", "ep"};

bool has_feature(const PointKey& k, const std::string& f) {
  const auto& v = k.v;
  if (f == "pp") return v[2] > 1;
  if (f == "tp") return v[1] > 1;
  if (f == "zero") return v[4] > 0;
  if (f == "zero3") return v[4] == 3;
  if (f == "mics") return v[4] > 0 && v[5] < v[3];
  if (f == "offload") return v[12] || v[13];
  if (f == "recompute") return v[10] != 0;
  if (f == "sp") return v[11] != 0;
  if (f == "interleaved") return v[8] == static_cast<int>(sim::PipelineSchedule::interleaved);
  if (f == "fp8") return v[15] != static_cast<int>(sim::Fp8Recipe::none);
  if (f == "cp") return v[16] > 1;
  if (f == "ep") return v[17] > 1;
  return false;
}

// a dominates b: no worse in all three, better in one.
bool dominates(const Point& a, const Point& b) {
  const double am = a.estimate.worst_memory_bytes, bm = b.estimate.worst_memory_bytes;
  const bool no_worse = a.time_per_token <= b.time_per_token && a.usd_per_token <= b.usd_per_token && am <= bm;
  const bool better = a.time_per_token < b.time_per_token || a.usd_per_token < b.usd_per_token || am < bm;
  return no_worse && better;
}

void insert_front(std::vector<Point>& front, const Point& p) {
  for (const auto& q : front)
    if (dominates(q, p) || q.key == p.key) return;
  std::erase_if(front, [&](const Point& q) { return dominates(p, q); });
  front.push_back(p);
}

auto heap_cmp = [](const Point& a, const Point& b) { return better(a, b); };  // worst on top

}  // namespace

void apply(const PointKey& k, sim::ParallelConfig& c) {
  const auto& v = k.v;
  c.tp = v[1];
  c.pp = v[2];
  c.dp = v[3];
  c.zero_stage = v[4];
  c.sharding_degree = v[5];
  c.global_batch_size = v[6];
  c.micro_batch_size = v[7];
  c.schedule = static_cast<sim::PipelineSchedule>(v[8]);
  c.virtual_stages = v[9];
  c.recompute = static_cast<sim::Recompute>(v[10]);
  c.sequence_parallel = v[11] != 0;
  c.offload_optimizer = v[12] != 0;
  c.offload_activations = v[13] != 0;
  c.precision = static_cast<sim::Precision>(v[14]);
  c.fp8 = static_cast<sim::Fp8Recipe>(v[15]);
  c.cp = v[16];
  c.ep = v[17];
  c.etp = v[18];
}

PointKey key_of(const sim::ParallelConfig& c, int nodes) {
  return PointKey{{nodes, c.tp, c.pp, c.dp, c.zero_stage, c.shard_group(), c.global_batch_size, c.micro_batch_size,
                   static_cast<int>(c.schedule), c.virtual_stages, static_cast<int>(c.recompute),
                   c.sequence_parallel ? 1 : 0, c.offload_optimizer ? 1 : 0, c.offload_activations ? 1 : 0,
                   static_cast<int>(c.precision), static_cast<int>(c.fp8), c.cp, c.ep, c.expert_tp()}};
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

void RegionAcc::merge(const RegionAcc& o) {
  evaluated += o.evaluated;
  fits += o.fits;
  allowed += o.allowed;
  price_rejected |= o.price_rejected;
  if (o.have_closest && (!have_closest || o.min_excess < min_excess ||
                         (o.min_excess == min_excess && o.closest < closest))) {
    min_excess = o.min_excess;
    closest = o.closest;
    node_index = o.node_index;
    have_closest = true;
  }
}

void ThreadState::offer(const Point& p) {
  insert_front(front, p);
  if (static_cast<int>(best.size()) < capacity_) {
    best.push_back(p);
    std::push_heap(best.begin(), best.end(), heap_cmp);
  } else if (better(p, best.front())) {
    std::pop_heap(best.begin(), best.end(), heap_cmp);
    best.back() = p;
    std::push_heap(best.begin(), best.end(), heap_cmp);
  }
}

void ThreadState::record_block(int nodes, int tp, int pp, int zero, const BlockTally& t, bool price_ok) {
  RegionAcc acc;
  acc.evaluated = t.evaluated;
  acc.fits = t.fits;
  acc.allowed = t.allowed;
  acc.price_rejected = !price_ok && t.fits > 0;
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
  for (int s = 0; s < cfg.pp; ++s) {
    sim::StageShape shape;
    shape.stage = s;
    for (int ch = 0; ch < cfg.virtual_stages; ++ch) {
      shape.layers += layers[ch * cfg.pp + s];
      shape.dense_layers += sim::dense_layers_in_chunk(ev.model(), cfg, ch, s);
    }
    shape.embedding = s == 0;
    shape.head = s == cfg.pp - 1;
    worst = std::max(worst, sim::stage_memory(c, shape).device.total());
  }
  return worst;
}

sim::ParallelConfig config_of(const Point& p, const sim::ModelSpec& m, const SearchSpace& space, const Constraints& c) {
  sim::ParallelConfig cfg;
  apply(p.key, cfg);
  cfg.seq_len = space.seq_len;
  cfg.lora = space.lora;
  cfg.mixed_precision = space.mixed_precision;
  cfg.attention = space.attention;
  cfg.fusion = space.fusion;
  cfg.grad_accum_dtype = sim::grad_accum_for(cfg, space.grad_accum_dtype);
  cfg.packed_document_tokens = space.packed_document_tokens;
  cfg.cp_kind = space.cp_kind;
  cfg.tp_comm_overlap = space.tp_comm_overlap && cfg.sequence_parallel;
  cfg.rank_order = space.rank_order;
  cfg.memory_headroom = c.memory_headroom;
  if (m.num_layers % cfg.pp) cfg.partition = default_split(static_cast<int>(m.num_layers), cfg.pp);
  return cfg;
}

}  // namespace shardplan::planner::detail
