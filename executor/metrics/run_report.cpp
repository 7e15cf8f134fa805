#include "run_report.hpp"

#include <algorithm>
#include <chrono>

#include "executor/errors.hpp"
#include "run_history.hpp"

namespace shardplan::executor {

nlohmann::json StepRecord::to_json() const {
  nlohmann::json j = {{"step", step},
                      {"loss", loss},
                      {"lr", lr},
                      {"grad_norm", grad_norm},
                      {"tokens", tokens},
                      {"step_seconds", step_s},
                      {"compute_seconds", compute_s},
                      {"tp_comm_seconds", tp_comm_s},
                      {"dp_comm_seconds", dp_comm_s},
                      {"optimizer_seconds", optimizer_s},
                      {"tokens_per_second", tokens_per_s},
                      {"loss_scale", loss_scale},
                      {"skipped", skipped},
                      {"peak_memory_bytes", peak_bytes},
                      {"pp_comm_seconds", pp_comm_s},
                      {"pipeline",
                       {{"bubble_seconds_per_stage", stage_bubble_s},
                        {"p2p_seconds_per_stage", stage_p2p_s},
                        {"forward_seconds_per_stage", stage_forward_s},
                        {"backward_input_seconds_per_stage", stage_input_grad_s},
                        {"backward_weight_seconds_per_stage", stage_weight_grad_s},
                        {"in_flight_activation_bytes_per_stage", stage_in_flight_bytes},
                        {"max_in_flight_per_stage", stage_max_in_flight}}}};
  if (cp) j["cp_comm_seconds"] = cp_comm_s;
  if (moe) {
    j["a2a_seconds"] = a2a_s;
    j["router_load_imbalance"] = router_imbalance;
    j["router_load_imbalance_max"] = router_imbalance_max;
    j["tokens_dropped"] = tokens_dropped;
    if (moe_aux_loss >= 0) j["moe_aux_loss"] = moe_aux_loss;
  }
  return j;
}

namespace {

// Per-stage medians (times) and maxima (memory, counts) over the steps after `skip`.
nlohmann::json pipeline_summary(const std::vector<StepRecord>& steps, size_t skip, const std::string& schedule) {
  const size_t stages = steps.empty() ? 0 : steps.back().stage_bubble_s.size();
  std::vector<double> bubble, p2p, bytes, fwd, bwd_input, bwd_weight;
  std::vector<int> held;
  auto at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : 0.0; };
  for (size_t st = 0; st < stages; ++st) {
    std::vector<double> b, q, f, bi, bw;
    double peak = 0;
    int most = 0;
    for (size_t i = skip; i < steps.size(); ++i) {
      const StepRecord& r = steps[i];
      if (r.stage_bubble_s.size() != stages) continue;
      b.push_back(r.stage_bubble_s[st]);
      q.push_back(r.stage_p2p_s[st]);
      f.push_back(at(r.stage_forward_s, st));
      bi.push_back(at(r.stage_input_grad_s, st));
      bw.push_back(at(r.stage_weight_grad_s, st));
      peak = std::max(peak, r.stage_in_flight_bytes[st]);
      most = std::max(most, r.stage_max_in_flight[st]);
    }
    bubble.push_back(median(b));
    p2p.push_back(median(q));
    fwd.push_back(median(f));
    bwd_input.push_back(median(bi));
    bwd_weight.push_back(median(bw));
    bytes.push_back(peak);
    held.push_back(most);
  }
  return {{"stages", stages},
          {"schedule", schedule},
          {"bubble_seconds_per_stage", bubble},
          {"p2p_seconds_per_stage", p2p},
          {"forward_seconds_per_stage", fwd},
          {"backward_input_seconds_per_stage", bwd_input},
          {"backward_weight_seconds_per_stage", bwd_weight},
          {"in_flight_activation_bytes_per_stage", bytes},
          {"max_in_flight_per_stage", held}};
}

}  // namespace

int MetricsLog::open(const std::string& path, bool continue_history) {
  attempt_ = continue_history ? next_attempt(read_metrics(path)) : 1;
  if (attempt_ > 1) {
    // A kill in the middle of a write leaves the last line without its newline: end it first.
    bool ends_with_newline = true;
    if (std::ifstream in(path, std::ios::binary | std::ios::ate); in && in.tellg() > 0) {
      in.seekg(-1, std::ios::end);
      ends_with_newline = in.get() == '\n';
    }
    out_.open(path, std::ios::app);
    if (out_ && !ends_with_newline) out_ << '\n';
  } else {
    out_.open(path, std::ios::trunc);
  }
  if (!out_) throw InputError(path + ": cannot write the step metrics");
  return attempt_;
}

void MetricsLog::write(const StepRecord& r) {
  if (!out_.is_open()) return;
  nlohmann::json j = r.to_json();
  j["attempt"] = attempt_;
  j["unix_time_s"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  out_ << j.dump() << '\n';
  out_.flush();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Steps left out of the medians as warm-up: the first quarter, at least the first (of three or
// more). A run's first steps grow the heap to its high-water mark (each new 4 KiB page faults on
// first touch, ~17 us on this project's VM) and settle the allocator's free lists and the caches:
// GPT-2 ZeRO-3 on 2 CPU ranks ran steps 2 and 3 at 1.5-2x its steady time (646,000 page faults
// in the first three steps, almost none after).
size_t warmup_steps(size_t steps) { return steps > 2 ? std::max<size_t>(1, steps / 4) : 0; }

namespace {

// The measured medians over the steps after the warm-up.
formats::RunReport::Measured measured_of(const ReportInputs& in) {
  const size_t skip = warmup_steps(in.steps.size());
  auto med = [&](double StepRecord::*field) {
    std::vector<double> v;
    for (size_t i = skip; i < in.steps.size(); ++i) v.push_back(in.steps[i].*field);
    return median(v);
  };
  formats::RunReport::Measured m;
  m.steps = static_cast<int64_t>(in.steps.size());
  m.steps_in_medians = static_cast<int64_t>(in.steps.size() - skip);
  m.step_s = med(&StepRecord::step_s);
  // How steady the machine was: the 10th and 90th percentiles of the step times in the medians.
  std::vector<double> steps;
  for (size_t i = skip; i < in.steps.size(); ++i) steps.push_back(in.steps[i].step_s);
  std::sort(steps.begin(), steps.end());
  auto quantile = [&](double q) {
    return steps.empty() ? 0.0 : steps[static_cast<size_t>(q * static_cast<double>(steps.size() - 1) + 0.5)];
  };
  m.step_s_p10 = quantile(0.1);
  m.step_s_p90 = quantile(0.9);
  const double tokens = in.steps.empty() ? 0 : static_cast<double>(in.steps.back().tokens);
  m.tokens_per_s = m.step_s > 0 ? tokens / m.step_s : 0;
  m.compute_s = med(&StepRecord::compute_s);
  m.tp_comm_s = med(&StepRecord::tp_comm_s);
  m.dp_comm_s = med(&StepRecord::dp_comm_s);
  m.optimizer_s = med(&StepRecord::optimizer_s);
  m.pp_comm_s = med(&StepRecord::pp_comm_s);
  m.pipeline = pipeline_summary(in.steps, skip, in.schedule);
  m.peak_bytes = in.peak_bytes_per_rank.empty()
                     ? 0
                     : *std::max_element(in.peak_bytes_per_rank.begin(), in.peak_bytes_per_rank.end());
  m.peak_bytes_per_rank = in.peak_bytes_per_rank;
  m.memory_source = in.memory_source;
  m.first_loss = in.steps.empty() ? 0 : in.steps.front().loss;
  m.final_loss = in.steps.empty() ? 0 : in.steps.back().loss;
  if (in.reference_gemm_start_s > 0 && in.reference_gemm_end_s > 0) {
    m.reference_gemm_start_s = in.reference_gemm_start_s;
    m.reference_gemm_end_s = in.reference_gemm_end_s;
  }
  if (!in.steps.empty() && in.steps.back().cp) m.cp_comm_s = med(&StepRecord::cp_comm_s);
  if (!in.steps.empty() && in.steps.back().moe) {
    formats::RunReport::Moe moe;
    moe.a2a_s = med(&StepRecord::a2a_s);
    moe.router_imbalance = med(&StepRecord::router_imbalance);
    std::vector<double> dropped;  // per step, median as the figures above
    for (size_t i = skip; i < in.steps.size(); ++i) dropped.push_back(static_cast<double>(in.steps[i].tokens_dropped));
    moe.tokens_dropped = median(dropped);
    if (in.steps.back().moe_aux_loss >= 0) moe.aux_loss = med(&StepRecord::moe_aux_loss);
    m.moe = moe;
  }
  return m;
}

// What the plan predicted, in the report's terms.
formats::RunReport::Predicted predicted_of(const simulator::Prediction& p, bool cp, bool moe) {
  formats::RunReport::Predicted r;
  r.feasible = p.feasible;
  r.step_s = p.time.step_s;
  r.tokens_per_s = p.tokens_per_s;
  r.tp_comm_s = p.time.tp_comm_s;
  r.dp_comm_s = p.time.dp_exposed_comm_s;
  r.optimizer_s = p.time.optimizer_s;
  r.sync_wait_s = p.time.sync_wait_s;
  r.pipeline_bubble_s = p.time.pipeline_bubble_s;
  r.pp_p2p_s = p.time.pp_p2p_s;
  r.max_in_flight_per_stage = p.pipeline.max_in_flight;
  r.in_flight_activation_bytes_per_stage = p.pipeline.peak_stored_activation_bytes;
  r.peak_bytes = p.worst.allocated();  // what shardrun measures: tensor bytes
  r.memory_bytes = {{"parameters", p.worst.parameters},
                    {"gradients", p.worst.gradients},
                    {"optimizer_states", p.worst.optimizer_states},
                    {"activations", p.worst.activations},
                    {"lora", p.worst.lora},
                    {"comm_buffers", p.worst.comm_buffers},
                    {"workspace", p.worst.workspace}};
  if (cp) r.cp_comm_s = p.time.cp_comm_s;
  if (moe) r.a2a_s = p.time.ep_comm_s;  // exposed dispatch/combine (+ etp gathers)
  return r;
}

}  // namespace

formats::RunReport make_run_report(const ReportInputs& in) {
  formats::RunReport r;
  r.plan = in.plan_path;
  r.model = in.model;
  r.world_size = in.world_size;
  r.device = in.device;
  r.threads_per_rank = in.threads_per_rank;
  r.layout = in.layout;
  r.precision = in.precision;
  r.attention = in.attention;
  r.attempts = in.attempts;
  r.blas_kernels = in.blas_kernels;
  r.cpu_gemm = in.cpu_gemm;
  r.measured = measured_of(in);
  const bool cp = !in.steps.empty() && in.steps.back().cp, moe = !in.steps.empty() && in.steps.back().moe;
  r.predicted = predicted_of(in.prediction, cp, moe);
  return r;
}

nlohmann::json build_report(const ReportInputs& in) { return formats::to_json(make_run_report(in)); }

}  // namespace shardplan::executor
