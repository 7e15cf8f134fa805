// The full simulation: event-simulated pipeline, per-stage memory with the simulated peaks,
// the critical stage's time breakdown, the trace.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "errors.hpp"
#include "evaluator.hpp"

namespace shardplan::simulator {
namespace {

struct StageRun {
  StagePrediction pred;
  ChunkTime sum;  // per micro-batch, all chunks
  double trainable = 0;
};

PipelineInput pipeline_input(const ConfigContext& c, std::vector<ChunkTime>& chunks) {
  const auto& cfg = *c.cfg;
  const int p = cfg.pp, v = cfg.virtual_stages;
  PipelineInput in;
  in.stages = p;
  in.micro_batches = cfg.micro_batches();
  in.virtual_stages = v;
  in.schedule = cfg.schedule;
  in.p2p_s = c.p2p_s;
  chunks.resize(static_cast<std::size_t>(p) * v);
  for (int ch = 0; ch < v; ++ch) {
    for (int s = 0; s < p; ++s) {
      const int vs = ch * p + s;
      chunks[vs] = chunk_time(c, chunk_shape(c.mc->model, cfg, ch, s));
      in.forward_s.push_back(chunks[vs].forward_s);
      in.backward_s.push_back(chunks[vs].backward_s);
      in.stored_activation_bytes.push_back(chunks[vs].stored_bytes);
      in.weight_grad_s.push_back(std::min(chunks[vs].weight_grad_s, chunks[vs].backward_s));
    }
  }
  return in;
}

std::string infeasible_reason(const Prediction& pr) {
  char buf[320];
  const auto& st = pr.stages[pr.worst_stage];
  if (st.memory.total() > pr.usable_bytes) {
    const MemoryBreakdown& m = st.memory;
    std::pair<double, const char*> parts[] = {{m.parameters, "parameters"},
                                              {m.gradients, "gradients"},
                                              {m.optimizer_states, "optimizer states"},
                                              {m.activations, "activations"},
                                              {m.lora, "LoRA adapters"},
                                              {m.comm_buffers, "communication buffers"},
                                              {m.workspace, "workspace"},
                                              {m.runtime(), "the runtime (context, communicators, workspaces)"}};
    auto big = *std::max_element(std::begin(parts), std::end(parts));
    std::snprintf(buf, sizeof buf, "stage %d needs %s per device > %s usable (%s x %.2f); largest: %s %s", st.stage,
                  format_bytes(m.total()).c_str(), format_bytes(pr.usable_bytes).c_str(),
                  format_bytes(pr.device_capacity_bytes).c_str(), 1.0 - pr.headroom, big.second,
                  format_bytes(big.first).c_str());
    return buf;
  }
  std::snprintf(buf, sizeof buf, "offloaded state needs %s per node > %s host memory usable",
                format_bytes(pr.host_bytes_per_node).c_str(),
                format_bytes(pr.host_capacity_bytes * (1.0 - pr.headroom)).c_str());
  return buf;
}

// The prediction's identity and capacities, before anything is simulated.
Prediction prediction_frame(const ConfigContext& c) {
  const ModelContext& mc = *c.mc;
  const ParallelConfig& cfg = *c.cfg;
  const auto& hw = mc.cluster.hardware;
  Prediction pr;
  pr.model_name = mc.model.name;
  pr.hardware_name = hw.name;
  pr.hardware_calibrated = hw.calibration.calibrated;
  pr.hardware_calibration_rule = hw.calibration.rule;
  pr.framework_name = cfg.framework.name;
  pr.memory_reported = cfg.framework.reports;
  pr.nodes = mc.cluster.nodes;
  pr.devices = cfg.devices();
  pr.micro_batches = cfg.micro_batches();
  pr.total_parameters = mc.counts.total;
  pr.active_parameters = mc.counts.active;
  pr.trainable_parameters = mc.lora.enabled() ? static_cast<int64_t>(mc.lora_parameters()) : mc.counts.total;
  pr.device_capacity_bytes = hw.device.memory_bytes;
  pr.headroom = cfg.memory_headroom;
  pr.usable_bytes = hw.device.memory_bytes * (1.0 - cfg.memory_headroom);
  pr.host_capacity_bytes = hw.host.memory_bytes;
  return pr;
}

// Every chunk timed, the pipeline event-simulated, and the share of its makespan the p2p hops add.
void simulate_step_pipeline(const ConfigContext& c, std::vector<ChunkTime>& chunks, Prediction& pr, bool events) {
  PipelineInput in = pipeline_input(c, chunks);
  in.record_events = events;
  pr.pipeline = simulate_pipeline(in);
  if (events && c.cfg->pp > 1 && c.p2p_s > 0) {  // the p2p share: a second pipeline, for the full account
    PipelineInput no_p2p = in;
    no_p2p.p2p_s = 0;
    no_p2p.record_events = false;
    pr.time.pp_p2p_s = pr.pipeline.makespan_s - pipeline_makespan(no_p2p);
  }
}

// What the stages leave after the pipeline: the longest exposed DP tail past a stage's slack, the
// longest optimizer step, the most host memory one device's state takes.
struct StageTails {
  double tail = 0, opt = 0, host_per_device = 0;
};

// Per stage: memory with the simulated activation peak, end-of-step tail after its finish.
StageTails simulate_stages(const ConfigContext& c, const std::vector<ChunkTime>& chunks, std::vector<StageRun>& runs,
                           Prediction& pr) {
  const ModelContext& mc = *c.mc;
  const ParallelConfig& cfg = *c.cfg;
  const int p = cfg.pp, v = cfg.virtual_stages, runs_per_chunk = chunk_micro_batches(cfg);
  const auto layers = layers_per_chunk(mc.model, cfg);
  runs.resize(static_cast<std::size_t>(p));
  double tail = 0, opt = 0, host_per_device = 0;
  for (int s = 0; s < p; ++s) {
    StageRun& r = runs[s];
    StageShape shape;
    shape.stage = s;
    for (int ch = 0; ch < v; ++ch) {
      const ChunkTime& t = chunks[ch * p + s];
      shape.max_chunk_stored = std::max(shape.max_chunk_stored, t.stored_bytes);
      r.sum += t;
      shape.layers += layers[static_cast<std::size_t>(model_chunk_index(cfg, ch, s))];
      shape.dense_layers += dense_layers_in_chunk(mc.model, cfg, ch, s);
    }
    for (int ch = 0; ch < v; ++ch) {  // rank 0 (and DualPipe's last), the last rank (or rank 0 of a V)
      shape.embedding |= model_chunk_index(cfg, ch, s) == 0;
      shape.head |= model_chunk_index(cfg, ch, s) == model_chunks(cfg) - 1;
    }
    shape.in_flight = pr.pipeline.max_in_flight[s];
    shape.peak_stored_bytes = pr.pipeline.peak_stored_activation_bytes[s];
    const StageMemory mem = stage_memory(c, shape);
    r.trainable = mem.trainable_per_device;
    r.pred = {s,
              shape.layers,
              shape.embedding,
              shape.head,
              static_cast<int64_t>(mem.params_per_device),
              shape.in_flight,
              r.sum.forward_s,
              r.sum.backward_s,
              mem.host_bytes,
              mem.device};
    host_per_device = std::max(host_per_device, mem.host_bytes);
    const StepTail t = step_tail(c, mem, r.sum.backward_s / v, r.sum.forward_s);
    const double slack = pr.pipeline.makespan_s - pr.pipeline.stage_end_s[s];
    tail = std::max(tail, t.exposed_s - slack);
    opt = std::max(opt, t.optimizer_s);
    pr.time.dp_total_comm_s = std::max(pr.time.dp_total_comm_s, runs_per_chunk * r.sum.dp_total_s + t.total_s);
    pr.stages.push_back(r.pred);
  }
  return {std::max(0.0, tail), opt, host_per_device};
}

// Memory verdict: the fullest stage against the device, the offloaded state against the host.
void judge_memory(const ConfigContext& c, double host_per_device, Prediction& pr) {
  const ParallelConfig& cfg = *c.cfg;
  for (const auto& st : pr.stages)
    if (st.memory.total() > pr.stages[pr.worst_stage].memory.total()) pr.worst_stage = st.stage;
  pr.worst = pr.stages[pr.worst_stage].memory;
  pr.host_bytes_per_node = host_per_device * c.mc->cluster.per_node();
  const double host_bytes = c.mc->cluster.hardware.host.memory_bytes;
  const bool host_fits = pr.host_bytes_per_node <= host_bytes * (1.0 - cfg.memory_headroom);
  pr.feasible = pr.worst.total() <= pr.usable_bytes && host_fits;
  if (!pr.feasible) pr.infeasible_reason = infeasible_reason(pr);
}

// Time breakdown along the busiest stage (m: the micro-batches each of its chunks runs); the parts
// add up to the step.
void break_down_time(const std::vector<StageRun>& runs, int m, const StageTails& tails, Prediction& pr) {
  const double tail = tails.tail, opt = tails.opt;
  int busiest = 0;
  for (int s = 0; s < static_cast<int>(runs.size()); ++s)
    if (pr.pipeline.stage_busy_s[s] > pr.pipeline.stage_busy_s[busiest]) busiest = s;
  const ChunkTime& b = runs[busiest].sum;
  TimeBreakdown& t = pr.time;
  t.forward_compute_s = m * b.fwd_compute_s;
  t.backward_compute_s = m * b.bwd_compute_s;
  t.recompute_s = m * b.recompute_s;
  t.tp_comm_s = m * b.tp_comm_s;
  t.cp_comm_s = m * b.cp_comm_s;
  t.ep_comm_s = m * b.ep_comm_s;
  t.dp_exposed_comm_s = m * b.dp_exposed_s + tail;
  t.offload_exposed_s = m * b.offload_exposed_s;
  t.sync_wait_s = m * b.sync_wait_s;
  t.pipeline_bubble_s = pr.pipeline.bubble_s();
  t.optimizer_s = opt;
  t.step_s = pr.pipeline.makespan_s + tail + opt;
  t.dp_overlapped_comm_s = std::max(0.0, t.dp_total_comm_s - t.dp_exposed_comm_s);
  SHARDPLAN_CHECK(std::abs(t.forward_compute_s + t.backward_compute_s + t.recompute_s + t.tp_comm_s + t.cp_comm_s +
                           t.ep_comm_s + t.dp_exposed_comm_s + t.offload_exposed_s + t.pipeline_bubble_s +
                           t.optimizer_s + t.sync_wait_s - t.step_s) <= 1e-9 * t.step_s + 1e-12,
                  "time breakdown does not add up to the step time");
}

// Throughput and utilisation.
void rate_throughput(const ConfigContext& c, Prediction& pr) {
  const ParallelConfig& cfg = *c.cfg;
  const int m = cfg.micro_batches();
  const TimeBreakdown& t = pr.time;
  pr.tokens_per_step = static_cast<double>(cfg.global_batch_size) * cfg.seq_len;
  pr.tokens_per_s = pr.tokens_per_step / t.step_s;
  pr.samples_per_s = cfg.global_batch_size / t.step_s;
  double mf = 0, hf = 0;
  flops_per_micro_batch(c, &mf, &hf);
  pr.model_flops_per_step = mf * m * cfg.dp;
  pr.hardware_flops_per_step = hf * m * cfg.dp;
  pr.achieved_tflops_per_device = pr.hardware_flops_per_step / t.step_s / pr.devices / 1e12;
  pr.mfu = pr.model_flops_per_step / (t.step_s * pr.devices * c.env.peak_flops);
  const double gemm_peak = cfg.uses_fp8() ? c.env.fp8_peak_flops : c.env.peak_flops;
  pr.gemm_peak_fraction = pr.model_flops_per_step / (t.step_s * pr.devices * gemm_peak);
}

// Price, goodput under failures, and the time and cost to train `goal.tokens`.
void price_training(const ConfigContext& c, const TrainingGoal& goal, Prediction& pr) {
  const ClusterSpec& cluster = c.mc->cluster;
  const double step_s = pr.time.step_s;
  pr.price_usd_per_hour = cluster.hardware.price.usd_per_hour * cluster.nodes;
  pr.goodput = predict_goodput(cluster, *c.cfg, static_cast<double>(pr.trainable_parameters), step_s);
  if (goal.tokens > 0) {
    pr.train_tokens = goal.tokens;
    pr.train_time_s = goal.tokens / pr.tokens_per_s;
    pr.train_time_with_failures_s = *pr.train_time_s / pr.goodput.goodput;
    if (pr.price_usd_per_hour > 0) {
      pr.train_cost_usd = *pr.train_time_s / 3600.0 * pr.price_usd_per_hour;
      pr.train_cost_with_failures_usd = *pr.train_time_with_failures_s / 3600.0 * pr.price_usd_per_hour;
    }
  }
}

}  // namespace

Prediction Evaluator::simulate(const ParallelConfig& cfg, const TrainingGoal& goal, bool pipeline_events) const {
  const ConfigContext c(mc_, cfg);
  Prediction pr = prediction_frame(c);
  std::vector<ChunkTime> chunks;
  simulate_step_pipeline(c, chunks, pr, pipeline_events);
  std::vector<StageRun> runs;
  const StageTails tails = simulate_stages(c, chunks, runs, pr);
  judge_memory(c, tails.host_per_device, pr);
  break_down_time(runs, chunk_micro_batches(cfg), tails, pr);
  rate_throughput(c, pr);
  price_training(c, goal, pr);
  return pr;
}

}  // namespace shardplan::simulator
