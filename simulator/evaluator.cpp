// Assembles chunk costs, pipeline schedule, stage memory and the end-of-step tail into an
// Estimate (closed-form pipeline) or a Prediction (event-simulated pipeline).
// Pipeline closed form (Narayanan et al. 2021, §2.2): makespan = (m + (p-1)/v) * T for
// uniform stages; for non-uniform stages (m-1) * max_s T_s + sum_s T_s (v = 1).
#include "evaluator.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

// One stage, all its chunks: per-micro-batch time and memory shape.
struct StageSummary {
  ChunkTime sum;  // summed over chunks
  double max_chunk_stored = 0;
  int layers = 0, dense_layers = 0;
  bool embedding = false, head = false;
};

// `per_chunk`, when given, receives each chunk's time.
StageSummary summarize_stage(const ConfigContext& c, int stage, std::vector<ChunkTime>* per_chunk = nullptr) {
  const auto& cfg = *c.cfg;
  StageSummary s;
  ChunkShape last_shape;
  ChunkTime t;
  for (int ch = 0; ch < cfg.virtual_stages; ++ch) {
    const ChunkShape shape = chunk_shape(c.mc->model, cfg, ch, stage);
    // A stage's chunks mostly share a shape: cost each run of equal ones once (the search's hot path).
    if (ch == 0 || shape != last_shape) t = chunk_time(c, shape);
    last_shape = shape;
    s.sum += t;
    if (per_chunk) per_chunk->push_back(t);
    s.max_chunk_stored = std::max(s.max_chunk_stored, t.stored_bytes);
    s.layers += shape.layers;
    s.dense_layers += shape.dense_layers;
    s.embedding |= shape.embedding;
    s.head |= shape.head;
  }
  return s;
}

Estimate estimate_of(const Prediction& pr) {
  Estimate e;
  e.fits = pr.feasible;
  e.worst_memory_bytes = pr.worst.total();
  e.worst_stage = pr.worst_stage;
  e.step_s = pr.time.step_s;
  e.tokens_per_s = pr.tokens_per_s;
  e.mfu = pr.mfu;
  e.goodput = pr.goodput.goodput;
  return e;
}

// V-Half and V-Min have no closed form: the reference builds their orders for equal F, B and W
// (zbv_greedy.py is always called with f = b = w, docs/split_backward_schedules.md §2.4), and at
// other times their period grows past the work (V-Min's to 6 max(F, B) a micro-batch). Nor has ZBV
// below 2p - 1 micro-batches: its order is built for 2p - 1 and drops the missing micro-batches'
// ops, leaving their holes (the closed form came out 7-13 % short there: bench/schedule_estimates).
// Nor has ZB2P up to 4p micro-batches, where its extra warm-up fills more than ZB-H1's closed form
// says (4-8 % slow). The estimate event-simulates such pipelines alone (p m small for ZBV and
// ZB2P), on the chunks' times: [chunk][stage] F, B+W, W.
double event_makespan(const ConfigContext& c, const std::vector<std::vector<ChunkTime>>& chunks) {
  const auto& cfg = *c.cfg;
  PipelineInput in;
  in.stages = cfg.pp;
  in.micro_batches = cfg.micro_batches();
  in.virtual_stages = cfg.virtual_stages;
  in.schedule = cfg.schedule;
  in.p2p_s = c.p2p_s;
  in.record_events = false;
  for (int ch = 0; ch < cfg.virtual_stages; ++ch)
    for (const auto& stage : chunks) {
      const ChunkTime& t = stage[static_cast<std::size_t>(ch)];
      in.forward_s.push_back(t.forward_s);
      in.backward_s.push_back(t.backward_s);
      in.weight_grad_s.push_back(std::min(t.weight_grad_s, t.backward_s));
    }
  return pipeline_makespan(in);
}

double usable_bytes(const ConfigContext& c) {
  return c.mc->cluster.hardware.device.memory_bytes * (1.0 - c.cfg->memory_headroom);
}

}  // namespace

std::string format_bytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

Evaluator::Evaluator(ModelSpec model, ClusterSpec cluster, LoraConfig lora) {
  mc_.model = std::move(model);
  mc_.cluster = std::move(cluster);
  mc_.lora = std::move(lora);
  mc_.linears = mc_.model.block_linears();
  mc_.lora_mask.assign(mc_.linears.size(), 0);
  if (mc_.lora.enabled()) {
    const auto resolved = resolve_lora_targets(mc_.model, mc_.lora.targets);
    for (std::size_t i = 0; i < mc_.linears.size(); ++i)
      for (const auto& r : resolved.linears)
        if (r.module == mc_.linears[i].module) mc_.lora_mask[i] = 1;
    mc_.lora_params_per_layer = lora_parameters_per_layer(resolved, mc_.lora.rank);
  }
  mc_.counts = count_parameters(mc_.model);
  if (mc_.model.is_moe()) {
    mc_.expert_linears = mc_.model.expert_linears();
    // PEFT matches targets by suffix: "gate_proj" (or Mixtral's "w1") adapts every routed
    // expert's linear too (shardrun builds them: executor/model/moe_block.cpp).
    mc_.expert_lora_mask.assign(mc_.expert_linears.size(), 0);
    for (std::size_t i = 0; i < mc_.expert_linears.size(); ++i)
      for (const auto& t : mc_.lora.targets)
        if (mc_.lora.enabled() && lora_target_matches(mc_.expert_linears[i].module, t)) mc_.expert_lora_mask[i] = 1;
    for (std::size_t i = 0; i < mc_.expert_linears.size(); ++i)
      if (mc_.expert_lora_mask[i])  // A (r x d_in) and B (d_out x r) per expert
        mc_.expert_lora_params_per_layer +=
            mc_.model.moe.num_experts * mc_.lora.rank * (mc_.expert_linears[i].d_in + mc_.expert_linears[i].d_out);
    if (mc_.model.moe.first_dense_layers > 0) {
      mc_.dense_linears = mc_.model.dense_block_linears();
      mc_.dense_lora_mask.assign(mc_.dense_linears.size(), 0);
      for (std::size_t i = 0; i < mc_.dense_linears.size(); ++i)
        for (const auto& t : mc_.lora.targets)
          if (mc_.lora.enabled() && lora_target_matches(mc_.dense_linears[i].module, t)) mc_.dense_lora_mask[i] = 1;
    }
  }
}

Estimate Evaluator::estimate(const ParallelConfig& cfg) const { return estimate(ConfigContext(mc_, cfg)); }

Estimate Evaluator::estimate(const ConfigContext& c) const {
  const ParallelConfig& cfg = *c.cfg;
  const int p = cfg.pp, v = cfg.virtual_stages, m = cfg.micro_batches();
  const bool uniform = cfg.partition.empty();
  // Interleaving over unequal chunks (an embedding-only first one, say) has no closed form: the one
  // below assumes a stage's chunks alike, and the in-flight chunks at its peak are not its mean
  // chunk. Such a partition is given by hand, never searched: the estimate is the simulation's.
  if (v > 1 && !uniform &&
      std::any_of(cfg.partition.begin(), cfg.partition.end(), [&](int l) { return l != cfg.partition.front(); }))
    return estimate_of(simulate(cfg));
  Estimate e;
  double sum_T = 0, max_T = 0, tail = 0, opt = 0, host = 0;
  int evaluated = 0;
  // Middle stages of an uneven split (v = 1) seen so far, by shape: a later one of the same shape
  // takes as long and holds and reduces no more (fewer in-flight micro-batches, more slack).
  struct Seen {
    int layers, dense;
    double T, W;
  };
  double max_F = 0;  // the slowest stage's forward (all its chunks)
  double sum_W = 0;  // a split backward's W where it fits beside a forward (min(W, F)), summed over stages
  std::array<Seen, 8> seen{};
  int n_seen = 0;
  // The least forward, input-gradient backward and weight gradient (all chunks) of any rank: a
  // pipeline of such ranks is no slower than this one (DualPipeV's estimate).
  double min_F = 1e300, min_B = 1e300, min_W = 1e300;
  const bool event_estimated = cfg.schedule == PipelineSchedule::vhalf || cfg.schedule == PipelineSchedule::vmin ||
                               (cfg.schedule == PipelineSchedule::zbv && m < 2 * p - 1) ||
                               (cfg.schedule == PipelineSchedule::zb2p && m <= 4 * p);  // event_makespan
  std::vector<std::vector<ChunkTime>> stage_chunks(event_estimated ? static_cast<std::size_t>(p)
                                                                   : 0);  // [stage][chunk]
  for (int s = 0; s < p; ++s) {
    // Uniform partitions: stages 1..p-2 are identical and hold no more than stage 0.
    if (uniform && s > 1 && s < p - 1) continue;  // counted as copies of stage 1
    const bool uneven_middle =
        !uniform && v == 1 && s > 0 && s < p - 1 && !event_estimated;  // event_makespan: every stage
    int layers = 0, dense = 0;
    if (uneven_middle) {
      layers = cfg.partition[static_cast<std::size_t>(s)];
      dense = dense_layers_in_chunk(c.mc->model, cfg, 0, s);
      const auto hit = std::find_if(seen.begin(), seen.begin() + n_seen,
                                    [&](const Seen& k) { return k.layers == layers && k.dense == dense; });
      if (hit != seen.begin() + n_seen) {
        sum_T += hit->T;
        sum_W += hit->W;
        continue;
      }
    }
    const StageSummary st =
        summarize_stage(c, s, event_estimated ? &stage_chunks[static_cast<std::size_t>(s)] : nullptr);
    if (event_estimated && uniform && s == 1)  // the middle ranks are copies of rank 1
      for (int k = 2; k < p - 1; ++k) stage_chunks[static_cast<std::size_t>(k)] = stage_chunks[1];
    const double T = st.sum.forward_s + st.sum.backward_s;
    const double W = std::min(st.sum.weight_grad_s, st.sum.forward_s);
    max_F = std::max(max_F, st.sum.forward_s);
    min_F = std::min(min_F, st.sum.forward_s);
    min_W = std::min(min_W, std::min(st.sum.weight_grad_s, st.sum.backward_s));
    min_B = std::min(min_B, st.sum.backward_s - std::min(st.sum.weight_grad_s, st.sum.backward_s));
    if (uneven_middle && n_seen < static_cast<int>(seen.size()))
      seen[static_cast<std::size_t>(n_seen++)] = {layers, dense, T, W};
    const int copies = (uniform && s == 1 && p > 2) ? p - 2 : 1;
    sum_T += copies * T;
    sum_W += copies * W;
    max_T = std::max(max_T, T);
    ++evaluated;
    // A dense model's middle stage holds no more than stage 0 (no embedding, no more in-flight
    // micro-batches), steps no more parameters and finishes its backward earlier: its memory,
    // optimizer step and tail cannot be the worst (the search's hot path skips them).
    if (uniform && s == 1 && p > 2 && !c.mc->model.is_moe()) continue;

    StageShape shape{s, st.layers,          st.embedding, st.head, in_flight_micro_batches(cfg.schedule, p, s, m, v),
                     0, st.max_chunk_stored};
    shape.peak_stored_bytes = std::max(st.max_chunk_stored, shape.in_flight * st.sum.stored_bytes / v);
    shape.dense_layers = st.dense_layers;
    const StageMemory mem = stage_memory(c, shape);
    host = std::max(host, mem.host_bytes);
    const double total = mem.device.total();
    if (total > e.worst_memory_bytes) {
      e.worst_memory_bytes = total;
      e.worst_stage = s;
    }
    const StepTail t = step_tail(c, mem, st.sum.backward_s / v, st.sum.forward_s);
    // Stage s ends s backward chunks before stage 0; DualPipe's ranks all end on their last W's.
    const double slack = bidirectional(cfg.schedule) ? 0.0 : s * (st.sum.backward_s / v);
    tail = std::max(tail, t.exposed_s - slack);
    opt = std::max(opt, t.optimizer_s);
  }
  double makespan = (m - 1.0 / v) * max_T + sum_T / v + 2.0 * (p * v - 1) * c.p2p_s;
  // Zero-bubble schedules: the deferred W's fill 2 (p - 1) W of 1F1B's bubble, (p-1)(F+B-W) left
  // (Qi et al. 2024, Table 2; ZB-H2 under a synchronous optimizer step ends as ZB-H1 does,
  // docs/split_backward_schedules.md §3); never below the busiest stage's work.
  if (event_estimated) makespan = event_makespan(c, stage_chunks);
  else if (cfg.schedule == PipelineSchedule::dualpipev)  // the busiest rank, or every rank at the least times
    makespan = std::max(
        m * max_T + 2.0 * (p - 1) * c.p2p_s,
        m * (min_F + min_B + min_W) + dualpipev_bubble(p, min_F / v, min_B / v, min_W / v) + 4.0 * (p - 1) * c.p2p_s);
  else if (bidirectional(cfg.schedule))  // DualPipeV's estimate over its cut-in-half, each chunk m / 2 times
    makespan = std::max(m / 2 * max_T + 2.0 * (p - 1) * c.p2p_s,
                        m / 2 * (min_F + min_B + min_W) + dualpipe_bubble(p, min_F / v, min_B / v, min_W / v) +
                            2.0 * (p - 1) * c.p2p_s);
  else if (v_shaped(cfg.schedule))  // ZBV: zero bubble within each rank's span, plus the first forwards'
    // descent to the last rank (docs/split_backward_schedules.md §3: 48 + 3 at p 4, m 8, unit times)
    makespan = m * max_T + (p - 1) * max_F / v + 4.0 * (p - 1) * c.p2p_s;
  else if (splits_backward(cfg.schedule)) makespan = std::max(m * max_T, makespan - 2.0 * (p - 1) * sum_W / p);
  e.step_s = makespan + std::max(0.0, tail) + opt;
  const double tokens = static_cast<double>(cfg.global_batch_size) * cfg.seq_len;
  e.tokens_per_s = tokens / e.step_s;
  double model_flops = 0, hw_flops = 0;
  flops_per_micro_batch(c, &model_flops, &hw_flops);
  const double devices = cfg.devices();
  e.mfu = model_flops * m * cfg.dp / (e.step_s * devices * c.env.peak_flops);
  const double trainable = mc_.lora.enabled() ? mc_.lora_parameters() : static_cast<double>(mc_.counts.total);
  e.goodput = predict_goodput(mc_.cluster, cfg, trainable, e.step_s).goodput;
  const auto& hw = mc_.cluster.hardware;
  e.fits = e.worst_memory_bytes <= usable_bytes(c) &&
           host * mc_.cluster.per_node() <= hw.host.memory_bytes * (1.0 - cfg.memory_headroom);
  return e;
}

double Evaluator::step_time_lower_bound(const ConfigContext& c, int max_virtual_stages, bool split_backward,
                                        bool bidirectional_pipeline) const {
  const ParallelConfig& cfg = *c.cfg;
  SHARDPLAN_CHECK(cfg.virtual_stages == 1 && !cfg.offload_activations && cfg.recompute == Recompute::none,
                  "step_time_lower_bound: expects one chunk per stage, no offload, no recompute");
  const int p = cfg.pp;
  const bool uniform = cfg.partition.empty();
  double max_T = 0, sum_T = 0, last_T = 0;
  std::vector<double> T(bidirectional_pipeline ? static_cast<std::size_t>(p) : 0);  // per stage
  int last_layers = -1, last_dense = -1;  // an uneven split's middle stages come in few shapes
  for (int s = 0; s < p; ++s) {
    const bool middle = s > 0 && s < p - 1;
    const bool copy = (uniform && middle && s > 1) ||  // copies of stage 1
                      (!uniform && middle && cfg.partition[static_cast<std::size_t>(s)] == last_layers &&
                       dense_layers_in_chunk(mc_.model, cfg, 0, s) == last_dense);
    if (!copy) {
      if (!uniform && middle) {
        last_layers = cfg.partition[static_cast<std::size_t>(s)];
        last_dense = dense_layers_in_chunk(mc_.model, cfg, 0, s);
      }
      const StageSummary st = summarize_stage(c, s);
      last_T = st.sum.forward_s + st.sum.backward_s;
      max_T = std::max(max_T, last_T);
    }
    sum_T += last_T;
    if (!T.empty()) T[static_cast<std::size_t>(s)] = last_T;
  }
  const double hops = 2.0 * (p - 1) * c.p2p_s;
  // Every stage runs m micro-batches' F, B and W; a V's stage holds the same layers, the
  // embedding and the head together (no less than either alone). DualPipe's rank s runs m / 2 of
  // stage s and m / 2 of stage p - 1 - s: the busiest such pair, at or below m max T.
  if (split_backward && bidirectional_pipeline) {
    double pair = 0;
    for (int s = 0; s < p; ++s)
      pair = std::max(pair, T[static_cast<std::size_t>(s)] + T[static_cast<std::size_t>(p - 1 - s)]);
    return cfg.micro_batches() / 2 * pair;
  }
  if (split_backward) return cfg.micro_batches() * max_T;  // the ZB1P estimate floors at m max T
  const double v = std::max(1, max_virtual_stages);
  return (cfg.micro_batches() - 1.0 / v) * max_T + sum_T / v + hops;
}

Prediction simulate(const ModelSpec& model, const ClusterSpec& cluster, ParallelConfig& cfg, const TrainingGoal& goal) {
  validate_config(model, cluster, cfg);
  Evaluator ev(model, cluster, cfg.lora);
  return ev.simulate(cfg, goal);
}

}  // namespace shardplan::simulator
