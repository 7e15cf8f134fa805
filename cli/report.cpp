#include "report.hpp"

#include "simulator/evaluator.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

namespace shardplan::cli {

namespace sim = shardplan::simulator;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pad_left(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}

std::string count(double n) {
  if (n >= 1e9) return fmt("%.2f B", n / 1e9);
  if (n >= 1e6) return fmt("%.2f M", n / 1e6);
  if (n >= 1e3) return fmt("%.1f K", n / 1e3);
  return fmt("%.0f", n);
}

std::string duration(double s) {
  if (s >= 86400 * 2) return fmt("%.1f days", s / 86400);
  if (s >= 3600) return fmt("%.1f h", s / 3600);
  if (s >= 60) return fmt("%.1f min", s / 60);
  if (s >= 1) return fmt("%.3f s", s);
  return fmt("%.2f ms", s * 1e3);
}

void print_config(std::ostream& out, const sim::Prediction& p, const sim::ParallelConfig& c) {
  out << "shardplan simulate: " << p.model_name << " on " << p.nodes << " x " << p.hardware_name << " (" << p.devices
      << " devices)\n";
  if (!p.hardware_calibrated) out << "  uncalibrated profile: " << p.hardware_calibration_rule << "\n";
  out << "  tp=" << c.tp << " pp=" << c.pp << " dp=" << c.dp;
  if (c.cp > 1) out << " cp=" << c.cp << " (" << sim::to_string(c.cp_kind) << ")";
  if (c.ep > 1 || c.expert_tp() != c.tp) out << " ep=" << c.ep << " etp=" << c.expert_tp();
  if (c.moe_capacity_factor > 0) out << " capacity=" << c.moe_capacity_factor;
  out << " zero=" << c.zero_stage;
  if (c.zero_stage > 0) out << " (shard " << c.shard_group() << ")";
  out << "  micro-batch=" << c.micro_batch_size << " global-batch=" << c.global_batch_size << " (" << p.micro_batches
      << " micro-batches)  seq=" << c.seq_len << "\n";
  out << "  schedule=" << sim::to_string(c.schedule);
  if (c.virtual_stages > 1) out << " x" << c.virtual_stages;
  out << " recompute=" << sim::to_string(c.recompute);
  if (c.recompute_num_layers > 0) out << " (first " << c.recompute_num_layers << " blocks per chunk)";
  if (c.recompute_every > 1) out << " (every " << c.recompute_every << "-th block of each pipeline rank)";
  out << " precision=" << sim::to_string(c.precision)
      << (c.precision != sim::Precision::fp32 ? std::string(" (") + sim::to_string(c.mixed_precision) + ")" : "")
      << " attention=" << sim::to_string(c.attention)
      << (c.fusion != sim::Fusion::eager ? std::string(" fusion=") + sim::to_string(c.fusion) : std::string())
      << (c.fp32_grad_accum() ? " grad-accum=fp32" : "")
      << (c.packed_document_tokens > 0 ? " packed-docs=" + std::to_string(c.packed_document_tokens) : "")
      << (c.uses_fp8() ? std::string(" fp8=") + sim::to_string(c.fp8) : "")
      << (c.fp8_param_gather ? " fp8-param-gather" : "")
      << (c.zero3_fetch == sim::Zero3Fetch::per_tensor_sync ? " zero3-fetch=per_tensor_sync" : "")
      << (c.sequence_parallel ? " sequence-parallel" : "") << (c.tp_comm_overlap ? " tp-comm-overlap" : "")
      << (c.offload_activations ? " offload-activations" : "") << (c.offload_optimizer ? " offload-optimizer" : "")
      << " order=" << c.rank_order << "\n";
  if (c.lora.enabled()) {
    out << "  " << (c.lora.quantized_base() ? "QLoRA (NF4 base)" : "LoRA") << " r=" << c.lora.rank
        << " alpha=" << c.lora.alpha << " dropout=" << c.lora.dropout << " targets=";
    for (std::size_t i = 0; i < c.lora.targets.size(); ++i) out << (i ? "," : "") << c.lora.targets[i];
    out << "\n";
  }
  out << "  parameters: " << count(static_cast<double>(p.total_parameters)) << " total, "
      << (p.active_parameters != p.total_parameters ? count(static_cast<double>(p.active_parameters)) + " active, "
                                                    : "")
      << count(static_cast<double>(p.trainable_parameters)) << " trainable\n\n";
}

std::vector<int> shown_stages(const sim::Prediction& p) {
  const int n = static_cast<int>(p.stages.size());
  if (n <= 6) {
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    return all;
  }
  std::set<int> s{0, 1, p.worst_stage, n - 2, n - 1};
  return {s.begin(), s.end()};
}

void print_memory(std::ostream& out, const sim::Prediction& p) {
  const auto stages = shown_stages(p);
  out << "memory per device (GiB)   ";
  for (int s : stages) out << pad_left("stage " + std::to_string(s), 10);
  out << "\n";
  auto row = [&](const char* name, double sim::MemoryBreakdown::*field) {
    out << "  " << name << std::string(24 - std::string(name).size(), ' ');
    for (int s : stages) out << fmt("%10.2f", p.stages[s].memory.*field / kGiB);
    out << "\n";
  };
  row("parameters", &sim::MemoryBreakdown::parameters);
  row("gradients", &sim::MemoryBreakdown::gradients);
  row("optimizer states", &sim::MemoryBreakdown::optimizer_states);
  row("activations", &sim::MemoryBreakdown::activations);
  row("LoRA adapters", &sim::MemoryBreakdown::lora);
  row("communication buffers", &sim::MemoryBreakdown::comm_buffers);
  row("workspace", &sim::MemoryBreakdown::workspace);
  row("runtime context", &sim::MemoryBreakdown::runtime_context);
  row("communicators", &sim::MemoryBreakdown::communicators);
  row("library workspace", &sim::MemoryBreakdown::library_workspace);
  out << "  total                   ";
  for (int s : stages) out << fmt("%10.2f", p.stages[s].memory.total() / kGiB);
  out << "\n  allocated (tensors)     ";
  for (int s : stages) out << fmt("%10.2f", p.stages[s].memory.allocated() / kGiB);
  if (p.worst.allocator_slack > 0) {
    out << "\n  reserved (allocator)    ";
    for (int s : stages) out << fmt("%10.2f", p.stages[s].memory.reserved() / kGiB);
  }
  out << "\n  in-flight micro-batches ";
  for (int s : stages) out << fmt("%10.0f", p.stages[s].in_flight_micro_batches);
  out << "\n  capacity " << fmt("%.2f", p.device_capacity_bytes / kGiB) << " GiB, usable "
      << fmt("%.2f", p.usable_bytes / kGiB) << " GiB (headroom " << fmt("%.0f%%", p.headroom * 100) << ")";
  if (p.host_bytes_per_node > 0) out << "; host " << fmt("%.1f", p.host_bytes_per_node / kGiB) << " GiB per node";
  out << "\n  => " << (p.feasible ? "FITS" : "DOES NOT FIT: " + p.infeasible_reason) << "\n\n";
}

void print_time(std::ostream& out, const sim::Prediction& p, const sim::ParallelConfig& c) {
  const auto& t = p.time;
  out << "step time breakdown (critical stage)\n";
  auto row = [&](const char* name, double s) {
    out << "  " << name << std::string(26 - std::string(name).size(), ' ') << pad_left(duration(s), 12)
        << fmt("%7.1f%%", t.step_s > 0 ? 100 * s / t.step_s : 0) << "\n";
  };
  row("forward compute", t.forward_compute_s);
  row("backward compute", t.backward_compute_s);
  row("recompute", t.recompute_s);
  row("TP communication", t.tp_comm_s);
  if (t.cp_comm_s > 0) row("CP communication", t.cp_comm_s);
  if (t.ep_comm_s > 0) row("EP all-to-all", t.ep_comm_s);
  row("pipeline bubble", t.pipeline_bubble_s);
  row("DP/ZeRO comm (exposed)", t.dp_exposed_comm_s);
  row("offload (exposed)", t.offload_exposed_s);
  row("optimizer step", t.optimizer_s);
  if (t.sync_wait_s > 0) row("wait for slowest rank", t.sync_wait_s);
  row("step", t.step_s);
  out << "  (p2p adds " << duration(t.pp_p2p_s) << "; DP/ZeRO comm hidden behind compute "
      << duration(t.dp_overlapped_comm_s) << ")\n\n";
  out << "throughput: " << fmt("%.0f", p.tokens_per_s) << " tokens/s, " << fmt("%.2f", p.samples_per_s)
      << " samples/s, " << fmt("%.1f", p.achieved_tflops_per_device) << " TFLOP/s per device, MFU "
      << fmt("%.1f%%", 100 * p.mfu) << " of the " << sim::to_string(c.precision) << " peak";
  if (c.uses_fp8()) out << " (" << fmt("%.1f%%", 100 * p.gemm_peak_fraction) << " of the FP8 peak its GEMMs run at)";
  out << "\n";
  if (p.price_usd_per_hour > 0) out << "price: " << fmt("%.2f", p.price_usd_per_hour) << " USD/h for the cluster\n";
  if (p.train_time_s) {
    out << "training " << count(*p.train_tokens) << " tokens: " << duration(*p.train_time_s);
    if (p.train_cost_usd) out << ", " << fmt("%.0f", *p.train_cost_usd) << " USD";
    out << " without failures; " << duration(*p.train_time_with_failures_s);
    if (p.train_cost_with_failures_usd) out << ", " << fmt("%.0f", *p.train_cost_with_failures_usd) << " USD";
    out << " with them\n";
  }
  const auto& g = p.goodput;
  out << "failures: job MTBF " << duration(g.job_mtbf_s) << ", checkpoint " << sim::format_bytes(g.checkpoint_bytes)
      << " written in " << duration(g.checkpoint_write_s) << " by " << g.checkpoint_writers << " rank(s), restart "
      << duration(g.restart_s) << "\n"
      << "  checkpoint every " << g.interval_steps << " steps (" << duration(g.interval_s) << "; Young "
      << duration(g.young_interval_s) << ", Daly " << duration(g.daly_interval_s) << "), expected goodput "
      << fmt("%.1f%%", 100 * g.goodput) << "\n";
}

}  // namespace

void print_prediction(std::ostream& out, const sim::Prediction& p, const sim::ParallelConfig& cfg) {
  print_config(out, p, cfg);
  print_memory(out, p);
  print_time(out, p, cfg);
}

}  // namespace shardplan::cli
