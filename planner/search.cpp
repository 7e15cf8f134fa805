// Enumeration, screening and threading of the configuration search.
// Legend: D devices, L layers, tp/pp/dp degrees, z ZeRO stage, N sharding group, m micro-batches.
#include "search.hpp"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "framework_space.hpp"
#include "frameworks/apply.hpp"
#include "search_point.hpp"
#include "search_result.hpp"
#include "simulator/errors.hpp"
#include "stage_partition.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;
using detail::Point;
using detail::PointKey;

namespace {

// The outer loop: everything the model-state lower bound depends on.
struct Block {
  int node_index = 0, nodes = 0;
  int tp = 1, pp = 1, dp = 1, zero = 0, shard = 1, gbs = 0, cp = 1, ep = 1, etp = 1;
  sim::Precision precision = sim::Precision::bf16;
  sim::Fp8Recipe fp8 = sim::Fp8Recipe::none;
  bool offload_optimizer = false;
};

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Context-parallel degrees valid for tp on D devices: dividing D / tp, the sequence in 2cp chunks
// (one chunk per rank without a causal mask), fused attention, heads for Ulysses.
std::vector<int> cp_degrees(const sim::ModelSpec& m, const SearchSpace& sp, int D, int tp) {
  std::vector<int> out;
  for (int cp : sp.context_parallel) {
    if (cp < 1 || (D / tp) % cp) continue;
    if (cp > 1) {
      if (sp.seq_len % sim::cp_sequence_chunks(m, cp, sp.cp_kind) || sp.attention != sim::AttentionKind::flash)
        continue;
      if (sp.packed_document_tokens > 0) continue;  // packed documents: cp 1 (check_packing)
      if (sp.cp_kind == sim::CpKind::all_to_all && !sim::cp_heads_divide(m, tp, cp)) continue;
    }
    out.push_back(cp);
  }
  return out;
}

// (ep, etp) pairs for an MoE model on a stage of `ranks` = tp x cp x dp ranks; (1, tp) otherwise.
std::vector<std::pair<int, int>> expert_layouts(const sim::ModelSpec& m, const SearchSpace& sp, int tp, int ranks) {
  if (!m.is_moe()) return {{1, tp}};
  std::vector<std::pair<int, int>> out;
  for (int ep : sp.expert_parallel)
    for (int etp : {tp, 1}) {
      if (etp == 1 && (tp == 1 || !sp.expert_tp_search)) continue;
      if (ep < 1 || m.moe.num_experts % ep || ranks % (ep * etp) || m.moe.expert_ffn_hidden % etp) continue;
      out.emplace_back(ep, etp);
    }
  return out;
}

std::vector<Block> enumerate_blocks(const sim::ModelSpec& m, const sim::HardwareProfile& hw, const SearchSpace& sp,
                                    const Constraints& c) {
  std::vector<Block> blocks;
  for (std::size_t ni = 0; ni < sp.node_counts.size(); ++ni) {
    const int nodes = sp.node_counts[ni];
    if (c.max_nodes > 0 && nodes > c.max_nodes) continue;
    const int per_node = sp.devices_per_node > 0 ? sp.devices_per_node : hw.node.devices_per_node;
    const int D = nodes * per_node;
    const int max_tp = c.max_tp > 0 ? c.max_tp : (c.tp_across_nodes ? D : per_node);
    for (int tp = 1; tp <= std::min(max_tp, D); tp *= 2) {
      if (D % tp || m.num_heads % tp || m.num_kv_heads % tp) continue;
      for (int cp : cp_degrees(m, sp, D, tp))
        for (int pp : divisors(D / (tp * cp))) {
          if (pp > m.num_layers || (!sp.uneven_pipeline && m.num_layers % pp)) continue;
          const int dp = D / (tp * cp * pp);
          for (const auto& [ep, etp] : expert_layouts(m, sp, tp, tp * cp * dp))
            for (int z : sp.zero_stages) {
              std::vector<int> shards{dp};
              if (z > 0 && sp.mics)
                for (int s = 2; s < dp; s *= 2)
                  if (dp % s == 0) shards.push_back(s);
              for (int shard : shards)
                for (int gbs : sp.global_batch_sizes)
                  for (auto prec : sp.precisions)
                    for (auto f8 : sp.fp8_recipes)
                      for (bool off : sp.offload_optimizer) {
                        if (hw.device.peak(prec) <= 0 || (gbs > 0 && gbs % dp)) continue;
                        // FP8 GEMMs need FP8 tensor cores and a 16-bit run around them.
                        if (f8 != sim::Fp8Recipe::none && (!hw.device.has_fp8() || prec == sim::Precision::fp32))
                          continue;
                        if (off && z == 0) continue;  // ZeRO-Offload needs a ZeRO stage
                        // Nothing to shard (one data-parallel rank, no cp, one expert replica): stage 0.
                        const bool one_replica = dp * cp == 1 && (!m.is_moe() || tp * cp * dp == ep * etp);
                        if (one_replica && z > 0 && !off) continue;
                        if (one_replica && z > 1) continue;  // stages coincide with one rank
                        blocks.push_back({static_cast<int>(ni), nodes, tp, pp, dp, z, z > 0 ? shard : dp, gbs, cp, ep,
                                          etp, prec, f8, off});
                      }
            }
        }
    }
  }
  return blocks;
}

struct Shared {
  const sim::ModelSpec* model;
  const SearchSpace* space;
  const Constraints* constraints;
  const SearchOptions* options;
  const std::vector<sim::Evaluator>* evaluators;
  const std::vector<Block>* blocks;
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex on_block_mutex{};
  std::atomic<long long> evaluated{0}, pruned{0}, outranked{0};
  std::atomic<long long> unrun{0};  // fit and would be kept, but no framework runs them (no --framework)
  std::atomic<bool> stopped{false};
};

// options.on_block: the block's best allowed point, else its closest-to-fitting one.
void report_block(Shared& sh, const sim::Evaluator& ev, double price, const std::optional<Point>& best,
                  const detail::BlockTally& tally) {
  SearchProgress prog;
  std::optional<Point> shown = best;
  if (!shown && tally.have_closest) {
    Point p;
    p.key = tally.closest;
    p.node_index = tally.node_index;
    const sim::ParallelConfig cfg = detail::config_of(p, *sh.model, *sh.space, *sh.constraints);
    p.estimate = ev.estimate(cfg);
    p.usd_per_token = price / 3600.0 / p.estimate.tokens_per_s;
    p.score = objective_score(sh.options->objective, p.estimate.tokens_per_s, price, p.estimate.worst_memory_bytes);
    shown = p;
  }
  if (shown) {
    sim::ParallelConfig cfg = detail::config_of(*shown, *sh.model, *sh.space, *sh.constraints);
    const int nodes = ev.cluster().nodes;
    prog.candidate =
        Candidate{ev.cluster(), cfg, shown->estimate, shown->score, shown->usd_per_token, describe(cfg, nodes)};
  }
  std::lock_guard lock(sh.on_block_mutex);
  prog.blocks_done = ++sh.done;
  prog.blocks_total = sh.blocks->size();
  prog.considered = sh.evaluated.load() + sh.pruned.load() + sh.outranked.load();
  sh.options->on_block(prog);
}

// The block's fixed part of every point: the space's fields, the block's degrees, sharding,
// precision and optimizer offload; the default split where pp does not divide the layers.
sim::ParallelConfig block_config(const Shared& sh, const Block& b) {
  const auto& sp = *sh.space;
  sim::ParallelConfig cfg = sp.base_config(*sh.constraints);
  cfg.tp = b.tp;
  cfg.pp = b.pp;
  cfg.dp = b.dp;
  cfg.cp = b.cp;
  cfg.ep = b.ep;
  cfg.etp = b.etp;
  cfg.zero_stage = b.zero;
  cfg.sharding_degree = b.shard;
  cfg.precision = b.precision;
  cfg.fp8 = b.fp8;
  cfg.offload_optimizer = b.offload_optimizer;
  sp.complete_config(cfg);
  if (sh.model->num_layers % b.pp) cfg.partition = default_split(static_cast<int>(sh.model->num_layers), b.pp);
  return cfg;
}

// One block's running state: where its points go and what it tallies.
struct BlockRun {
  BlockRun(Shared& shared, const Block& block, const sim::Evaluator& evaluator, detail::ThreadState& thread)
      : sh(shared), b(block), ev(evaluator), ts(thread) {}
  Shared& sh;
  const Block& b;
  const sim::Evaluator& ev;
  detail::ThreadState& ts;
  double price = 0;
  bool price_ok = true;
  double usable = 0;  // device bytes under the headroom
  detail::BlockTally tally;
  std::optional<Point> best;  // only tracked for options.on_block
  bool report = false;
};

// Estimates and scores one point; offers it to the thread's list when it fits and is allowed.
void evaluate_point(BlockRun& r, const sim::ParallelConfig& cfg, const sim::ConfigContext& ctx) {
  Point pt;
  pt.node_index = r.b.node_index;
  pt.key = detail::key_of(cfg, r.b.nodes);
  pt.estimate = r.ev.estimate(ctx);
  pt.time_per_token = 1.0 / (pt.estimate.tokens_per_s * pt.estimate.goodput);  // incl. failures
  pt.usd_per_token = r.price / 3600.0 * pt.time_per_token;
  pt.score = objective_score(r.sh.options->objective, pt.estimate.tokens_per_s, r.price, pt.estimate.worst_memory_bytes,
                             pt.estimate.goodput);
  const auto& fw = r.sh.constraints->framework;
  const bool allowed =
      r.price_ok && detail::meets(pt.key, *r.sh.constraints) && (!fw || !frameworks::why_not(*fw, cfg, r.ev.cluster()));
  r.tally.add(pt, allowed, r.usable);
  if (!pt.estimate.fits || !allowed) return;
  if (r.report && (!r.best || detail::better(pt, *r.best))) r.best = pt;
  // Without a framework given, a point is ranked or on the front only if some framework runs it
  // (the finish drops the others from the ranking): else points no one runs (zb1p with FP8, say)
  // crowd the runnable ones out. Asked only of points that would be kept.
  const bool rank = r.ts.would_rank(pt), front = r.ts.would_front(pt);
  if (!rank && !front) return;
  if (!fw && !some_framework_runs(cfg, r.ev.cluster())) {
    ++r.sh.unrun;
    return;
  }
  if (front) r.ts.offer_front(pt);
  if (rank) r.ts.offer_ranked(pt);
}

// One (micro-batch, SP) pair of a block with recompute none: its configuration and the
// per-layer costs, built once for the step-time bound and reused for its points.
struct NoRecompute {
  sim::ParallelConfig cfg;
  std::optional<sim::ConfigContext> ctx;
};

// The block's micro-batch sizes: the space's, or the global batch over dp alone where the
// framework has no gradient accumulation.
std::vector<int> micro_batch_sizes(const SearchSpace& sp, const Block& b) {
  if (!sp.gradient_accumulation && b.gbs > 0) return {b.gbs / b.dp};
  return sp.micro_batch_sizes;
}

// The inner loop's (micro-batch, SP) pairs in order, each with its configuration completed.
template <class Fn>
void for_each_batch_and_sp(const Shared& sh, const Block& b, sim::ParallelConfig& cfg, Fn&& fn) {
  const auto& sp = *sh.space;
  for (int mbs : micro_batch_sizes(sp, b)) {
    const int gbs = b.gbs > 0 ? b.gbs : mbs * b.dp;
    if (gbs % (mbs * b.dp)) continue;
    cfg.micro_batch_size = mbs;
    cfg.global_batch_size = gbs;
    for (bool seq_par : sp.sequence_parallel) {
      if (seq_par && (b.tp == 1 || sp.seq_len % b.tp)) continue;
      if (!seq_par && b.tp > 1 && sh.model->is_moe()) continue;  // Megatron-Core's MoE needs SP with TP
      if (seq_par && b.cp > 1 && sp.seq_len % (2 * b.cp * b.tp)) continue;
      cfg.sequence_parallel = seq_par;
      fn(mbs, seq_par);
    }
  }
}

// The block's point that needs the least memory, as a model-state-pruned block's representative:
// the smallest micro-batch, the space's last recompute (full by default), SP and activation
// offload where the space has them.
sim::ParallelConfig frugal_config(const Shared& sh, const Block& b, sim::ParallelConfig cfg) {
  const auto& sp = *sh.space;
  cfg.micro_batch_size = micro_batch_sizes(sp, b).front();
  cfg.global_batch_size = b.gbs > 0 ? b.gbs : cfg.micro_batch_size * b.dp;
  cfg.recompute = sp.recomputes.back();
  cfg.sequence_parallel =
      b.tp > 1 && sp.seq_len % b.tp == 0 &&
      std::find(sp.sequence_parallel.begin(), sp.sequence_parallel.end(), true) != sp.sequence_parallel.end();
  cfg.offload_activations =
      std::find(sp.offload_activations.begin(), sp.offload_activations.end(), true) != sp.offload_activations.end();
  cfg.schedule = sp.schedules.front();
  cfg.virtual_stages = 1;
  sp.complete_config(cfg);
  return cfg;
}

// The most model chunks per stage the block runs with `micro` micro-batches (1: not interleaved),
// as evaluate_schedules allows them.
int most_chunks(const Shared& sh, const Block& b, int micro) {
  const auto& sp = *sh.space;
  const int L = static_cast<int>(sh.model->num_layers);
  const bool inter =
      std::find(sp.schedules.begin(), sp.schedules.end(), sim::PipelineSchedule::interleaved) != sp.schedules.end();
  if (!inter || b.pp == 1 || L % b.pp || micro % b.pp) return 1;
  int most = 1;
  for (int v : sp.virtual_stages)
    if (v >= 2 && L % (b.pp * v) == 0) most = std::max(most, v);
  return most;
}

// Whether a zero-bubble schedule (B and W split) runs the configuration as the simulator takes it
// (validate_config): two or more stages, no recomputed forward, enough micro-batches (DualPipe(V)
// 2 pp), a V's 2 pp chunks dividing the layers, DualPipe's even pp and micro-batch count.
bool split_backward_runs(const sim::ModelSpec& m, const sim::ParallelConfig& cfg, sim::PipelineSchedule sched) {
  if (cfg.pp < 2) return false;
  if (sim::recomputes_forward(cfg) || cfg.micro_batches() < sim::min_micro_batches(sched, cfg.pp)) return false;
  if (sim::bidirectional(sched))
    return cfg.pp % 2 == 0 && cfg.micro_batches() % 2 == 0 && (!cfg.partition.empty() || m.num_layers % cfg.pp == 0);
  return !sim::v_shaped(sched) || m.num_layers % (2 * cfg.pp) == 0;
}

// The schedules, virtual stages and activation offloads of one context's configuration.
long long evaluate_schedules(BlockRun& run, sim::ParallelConfig& cfg, const sim::ConfigContext* ctx) {
  static const std::vector<int> kOneChunk{1}, kTwoChunks{2};
  const auto& sp = *run.sh.space;
  const Block& b = run.b;
  const bool even = run.sh.model->num_layers % b.pp == 0;
  const int micro = cfg.micro_batches();
  long long inner = 0;
  for (auto sched : sp.schedules) {
    const bool inter = sched == sim::PipelineSchedule::interleaved;
    if (b.pp == 1 && sched != sp.schedules.front()) continue;  // schedules coincide
    if (inter && (b.pp == 1 || !even || micro % b.pp)) continue;
    if (sim::splits_backward(sched) && !split_backward_runs(*run.sh.model, cfg, sched)) continue;
    const std::vector<int>& chunks = inter ? sp.virtual_stages : sim::two_chunks(sched) ? kTwoChunks : kOneChunk;
    for (int v : chunks) {
      if (inter && (v < 2 || run.sh.model->num_layers % (b.pp * v))) continue;
      cfg.schedule = sched;
      cfg.virtual_stages = v;
      for (bool off_act : sp.offload_activations) {
        cfg.offload_activations = off_act;
        ++inner;
        if (ctx) evaluate_point(run, cfg, *ctx);
      }
    }
  }
  cfg.schedule = sp.schedules.front();
  cfg.virtual_stages = 1;
  cfg.offload_activations = false;
  return inner;
}

// Evaluate every inner point of one block; returns false when cancelled.
bool run_block(Shared& sh, const Block& b, detail::ThreadState& ts) {
  const auto& sp = *sh.space;
  const auto& m = *sh.model;
  const sim::Evaluator& ev = (*sh.evaluators)[b.node_index];
  sim::ParallelConfig cfg = block_config(sh, b);
  BlockRun run{sh, b, ev, ts};
  run.price = ev.cluster().hardware.price.usd_per_hour * b.nodes;
  run.price_ok = sh.constraints->max_usd_per_hour <= 0 || run.price <= sh.constraints->max_usd_per_hour;
  run.report = static_cast<bool>(sh.options->on_block);

  // Model-state lower bound: smallest micro-batch, no activations. If even that does not fit,
  // no micro-batch, schedule or recompute choice can.
  cfg.micro_batch_size = micro_batch_sizes(sp, b).front();
  cfg.global_batch_size = b.gbs > 0 ? b.gbs : cfg.micro_batch_size * b.dp;
  cfg.schedule = sp.schedules.front();
  run.usable = ev.cluster().hardware.device.memory_bytes * (1.0 - cfg.memory_headroom);
  const double memory_bound = detail::model_state_lower_bound(ev, cfg);
  const bool prune = memory_bound > run.usable;

  // Step-time lower bound (Evaluator::step_time_lower_bound) of each (micro-batch, SP) part of the
  // block, from its recompute-none context: when every point of a part is slower than the k-th
  // best this thread holds and dominated on its Pareto front, none can be ranked or on the front.
  std::vector<std::unique_ptr<NoRecompute>> bases;
  std::vector<double> bounds;
  const bool has_none =
      std::find(sp.recomputes.begin(), sp.recomputes.end(), sim::Recompute::none) != sp.recomputes.end();
  // A zero-bubble schedule in the space: the bound that holds for it (m max T).
  const bool split = b.pp > 1 && std::any_of(sp.schedules.begin(), sp.schedules.end(), sim::splits_backward);
  const bool bidir = split && std::any_of(sp.schedules.begin(), sp.schedules.end(), sim::bidirectional);
  if (!prune && has_none) {
    cfg.recompute = sim::Recompute::none;
    for_each_batch_and_sp(sh, b, cfg, [&](int, bool) {
      sp.complete_config(cfg);
      auto& base = bases.emplace_back(std::make_unique<NoRecompute>());
      base->cfg = cfg;
      base->ctx.emplace(ev.context(), base->cfg);
      bounds.push_back(
          ev.step_time_lower_bound(*base->ctx, most_chunks(sh, b, base->cfg.micro_batches()), split, bidir));
    });
  }
  auto outranked = [&](double step_bound) {
    const double tokens = static_cast<double>(cfg.global_batch_size) * sp.seq_len;  // fixed in a block
    return ts.outranked(objective_score(sh.options->objective, tokens / step_bound, run.price, memory_bound),
                        step_bound / tokens, run.price / 3600.0 * step_bound / tokens, memory_bound);
  };

  long long evaluated = 0, skipped = 0, inner = 0;
  std::size_t part = 0;
  for_each_batch_and_sp(sh, b, cfg, [&](int, bool) {
    NoRecompute* base = bases.empty() ? nullptr : bases.at(part).get();  // built above, in this order
    const bool skip = prune || (base && sh.options->bound_pruning && outranked(bounds.at(part)));
    ++part;
    long long n = 0;
    for (auto rc : sp.recomputes) {
      if (rc == sim::Recompute::none && base) {
        n += evaluate_schedules(run, base->cfg, skip ? nullptr : &*base->ctx);
        continue;
      }
      cfg.recompute = rc;
      sp.complete_config(cfg);
      if (rc == sim::Recompute::op_sac && !sim::op_sac_unsupported(m, cfg).empty()) continue;  // not modelled
      // Per-layer costs depend on none of the loops below: one context for all of them.
      std::optional<sim::ConfigContext> ctx;
      if (!skip) ctx.emplace(ev.context(), cfg);
      n += evaluate_schedules(run, cfg, ctx ? &*ctx : nullptr);
    }
    inner += n;
    (skip ? skipped : evaluated) += n;
  });
  if (prune) {
    sh.pruned += inner;
    run.tally.pruned(inner, memory_bound - run.usable, detail::key_of(frugal_config(sh, b, cfg), b.nodes),
                     b.node_index);
  } else {
    sh.outranked += skipped;
    sh.evaluated += evaluated;
    if (skipped > 0) run.tally.outranked(skipped);
  }
  ts.record_block(b.nodes, b.tp, b.pp, b.zero, run.tally, run.price_ok);
  if (run.report) report_block(sh, ev, run.price, run.best, run.tally);
  return !(sh.options->cancel && sh.options->cancel->load());
}

void progress_loop(Shared& sh, std::atomic<bool>& done, std::chrono::steady_clock::time_point t0) {
  bool shown = false;
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (secs < 1.0 || done.load()) continue;
    const double frac = static_cast<double>(std::min(sh.next.load(), sh.blocks->size())) / sh.blocks->size();
    const int filled = static_cast<int>(frac * 30);
    std::fprintf(stderr, "\rsearch [%-30s] %3.0f%%  %lld evaluated  %.1f s", std::string(filled, '#').c_str(),
                 100 * frac, sh.evaluated.load() + sh.pruned.load() + sh.outranked.load(), secs);
    shown = true;
  }
  if (shown) std::fprintf(stderr, "\n");
}

}  // namespace

sim::ParallelConfig SearchSpace::base_config(const Constraints& c) const {
  sim::ParallelConfig cfg;
  cfg.seq_len = seq_len;
  cfg.lora = lora;
  cfg.mixed_precision = mixed_precision;
  cfg.attention = attention;
  cfg.fusion = fusion;
  cfg.packed_document_tokens = packed_document_tokens;
  cfg.cp_kind = cp_kind;
  cfg.rank_order = rank_order;
  cfg.memory_headroom = c.memory_headroom;
  if (c.framework) frameworks::bind(*c.framework, cfg);  // its terms: what `simulate --framework` predicts
  return cfg;
}

void SearchSpace::complete_config(sim::ParallelConfig& cfg) const {
  cfg.grad_accum_dtype = sim::grad_accum_for(cfg, grad_accum_dtype);
  cfg.tp_comm_overlap = tp_comm_overlap && cfg.sequence_parallel;
  cfg.zero3_fetch = cfg.zero_stage == 3 ? zero3_fetch : sim::Zero3Fetch::prefetch;
}

const char* to_string(Objective o) { return sim::name_of(o); }

SearchResult search(const sim::ModelSpec& model, const sim::HardwareProfile& hw, const SearchSpace& given,
                    const Constraints& constraints, const SearchOptions& options) {
  if (given.node_counts.empty()) throw sim::InputError("--nodes: expected at least one node count");
  // A node count given twice would enter every point twice under one key: the per-thread lists
  // would then hold a point's copies in one thread and not another, and the merge would depend on
  // which thread ran which block.
  SearchSpace space = given;
  std::sort(space.node_counts.begin(), space.node_counts.end());
  space.node_counts.erase(std::unique(space.node_counts.begin(), space.node_counts.end()), space.node_counts.end());
  if (space.micro_batch_sizes.empty()) throw sim::InputError("--micro-batch-sizes: expected at least one size");
  for (const auto& f : constraints.require)
    if (!detail::known_feature(f))
      throw sim::InputError("--require: unknown feature '" + f + "' (" + detail::feature_list() + ")");
  for (const auto& f : constraints.forbid)
    if (!detail::known_feature(f))
      throw sim::InputError("--forbid: unknown feature '" + f + "' (" + detail::feature_list() + ")");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<sim::Evaluator> evaluators;
  for (int nodes : space.node_counts) {
    if (nodes < 1) throw sim::InputError("--nodes: expected node counts >= 1");
    evaluators.emplace_back(model, sim::ClusterSpec{hw, nodes, space.devices_per_node}, space.lora);
  }
  std::vector<Block> blocks = enumerate_blocks(model, hw, space, constraints);
  // The step-time bound prunes against the best points found so far: for speed objectives, the
  // largest clusters (the fastest points) first. The result does not depend on the order.
  if (options.objective == Objective::throughput || options.objective == Objective::time_to_train)
    std::stable_sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.nodes > b.nodes; });
  Shared sh{&model, &space, &constraints, &options, &evaluators, &blocks};
  const int threads = detail::thread_count(options);
  std::vector<detail::ThreadState> states(threads, detail::ThreadState(std::max(options.top_k * 4, 32)));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&sh, &blocks, &state = states[t]] {
      for (std::size_t i = sh.next++; i < blocks.size(); i = sh.next++)
        if (!run_block(sh, blocks[i], state)) {
          sh.stopped = true;
          break;
        }
    });
  }
  std::atomic<bool> done{false};
  std::thread bar;
  if (options.progress) bar = std::thread(progress_loop, std::ref(sh), std::ref(done), t0);
  for (auto& th : pool) th.join();
  done = true;
  if (bar.joinable()) bar.join();

  SearchResult r = detail::finish(model, evaluators, space, constraints, options, states);
  r.evaluated = sh.evaluated.load();
  r.pruned = sh.pruned.load();
  r.outranked = sh.outranked.load();
  r.unrun = sh.unrun.load();
  r.considered = r.evaluated + r.pruned + r.outranked;
  r.interrupted = sh.stopped.load();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace shardplan::planner
