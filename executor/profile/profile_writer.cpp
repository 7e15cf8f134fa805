// Legend: peak_d best GEMM rate of dtype d (FLOP/s), bw best memory-bound rate (bytes/s),
// t_launch the minimal op's time; efficiency sample = rate / best rate with the launch cost
// taken out, as the simulator adds it back (layer_cost.cpp: gemm_time_s, memory_time_s);
// B_stream (CPU) the GEMMs' operand-stream rate: each GEMM sample's streamed bytes (its operands
// over the rank's cache share) / B_stream are taken out of it too and added back the same way.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "profile_samples.hpp"
#include "simulator/efficiency_fit.hpp"
#include "simulator/errors.hpp"

namespace shardplan::executor {
namespace {

namespace sim = shardplan::simulator;

bool is_gemm(const KernelSample& s) { return s.flops > 0; }
bool is_memory(const KernelSample& s) {
  static const std::set<std::string> kinds{"elementwise", "softmax", "layer_norm", "rms_norm", "embedding"};
  return s.pass.empty() && kinds.count(s.kind) > 0;
}

// The model's ops, per kind and dtype: seconds per element by size, forward and backward (a
// backward measured as no slower than noise gets a floor of 1 ns per call).
sim::EfficiencyCurve per_element_curve(const std::map<double, std::vector<double>>& seconds_by_elements) {
  sim::EfficiencyCurve c;
  for (const auto& [n, times] : seconds_by_elements) {  // samples of equal size (other shapes): their mean
    double sum = 0;
    for (double s : times) sum += std::max(s, 1e-9);
    c.log10_x.push_back(std::log10(n));
    c.efficiency.push_back(sum / static_cast<double>(times.size()) / n);
  }
  return c;
}

sim::OpCostTable fit_op_costs(const ProfileRun& run) {
  std::map<std::tuple<std::string, std::string, std::string>, std::map<double, std::vector<double>>> pts;
  for (const auto& s : run.kernels)
    if (!s.pass.empty() && s.elements > 0) pts[{s.kind, s.dtype, s.pass}][s.elements].push_back(s.seconds);
  sim::OpCostTable t{};
  for (int k = 0; k < sim::kOpKinds; ++k)
    for (int p = 0; p < 3; ++p) {
      const std::string kind = sim::op_kind_name(static_cast<sim::OpKind>(k));
      const std::string dtype = sim::to_string(static_cast<sim::Precision>(p));
      const auto f = pts.find({kind, dtype, "forward"}), b = pts.find({kind, dtype, "backward"});
      const auto w = pts.find({kind, dtype, "backward_warm"});
      if (f == pts.end()) continue;
      sim::OpCost& c = t[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)];
      c.forward_s_per_element = per_element_curve(f->second);
      if (b != pts.end()) c.backward_s_per_element = per_element_curve(b->second);
      if (b != pts.end() && w != pts.end()) c.backward_warm_s_per_element = per_element_curve(w->second);
    }
  return t;
}

double busy_seconds(const KernelSample& s, double launch_s) { return std::max(s.seconds - launch_s, 0.05 * s.seconds); }

nlohmann::json samples_json(const ProfileRun& run) {
  nlohmann::json kernels = nlohmann::json::array(), links = nlohmann::json::array();
  for (const auto& s : run.kernels) {
    kernels.push_back({{"kind", s.kind},
                       {"dtype", s.dtype},
                       {"shape", s.shape},
                       {"flops", s.flops},
                       {"bytes", s.bytes},
                       {"seconds", s.seconds}});
    if (s.flops > 0) kernels.back()["operand_bytes"] = s.operand_bytes;
    if (!s.pass.empty()) {
      kernels.back()["pass"] = s.pass;
      kernels.back()["elements"] = s.elements;
    }
  }
  for (const auto& l : run.links)
    links.push_back(
        {{"op", l.op}, {"bytes", l.bytes}, {"hops", l.hops}, {"wire_bytes", l.wire_bytes}, {"seconds", l.seconds}});
  return {{"kernels", kernels}, {"collectives", links}};
}

struct Fits {
  std::map<std::string, double> peak;  // by dtype
  double launch_s = 0, bandwidth = 0;
  std::map<std::string, sim::CurveFit> gemm;  // by dtype
  sim::CurveFit memory;
  sim::GemmStreamFit stream;  // CPU: the GEMMs' operand stream (stream_Bps 0: none)
};

// The rank's share of the last-level cache: operands above it stream (simulator/efficiency_fit.hpp,
// streamed_operand_bytes), as layer_cost.cpp's CostEnv::cache_share_bytes has it.
double cache_share_bytes(const ProfileRun& run) { return run.last_level_cache_bytes / std::max(1, run.ranks_on_node); }

// A GEMM's time without its streamed operands (the simulator adds them back at B_stream:
// layer_cost.cpp, gemm_time_s), floored at half the measured time.
double gemm_compute_seconds(const KernelSample& s, double busy, const sim::GemmStreamFit& stream, double cache_share) {
  if (stream.stream_Bps <= 0) return busy;
  return std::max(busy - sim::streamed_operand_bytes(s.operand_bytes, cache_share) / stream.stream_Bps, 0.5 * busy);
}

Fits fit_device(const ProfileRun& run) {
  Fits f;
  for (const auto& s : run.kernels)
    if (s.kind == "launch") f.launch_s = s.seconds;
  const double share = cache_share_bytes(run);
  std::vector<sim::GemmSample> stream;
  for (const auto& s : run.kernels)
    if (s.kind == "gemm_stream")
      stream.push_back({s.flops, sim::streamed_operand_bytes(s.operand_bytes, share), busy_seconds(s, f.launch_s)});
  if (stream.size() >= 2) f.stream = sim::fit_gemm_stream(stream);
  for (const auto& s : run.kernels) {
    const double busy = busy_seconds(s, f.launch_s);
    if (is_gemm(s))
      f.peak[s.dtype] = std::max(f.peak[s.dtype], s.flops / gemm_compute_seconds(s, busy, f.stream, share));
    if (is_memory(s)) f.bandwidth = std::max(f.bandwidth, s.bytes / busy);
  }
  if (f.peak.count("fp32") == 0) throw sim::InputError("shardrun profile: no fp32 GEMM was measured");
  if (f.bandwidth <= 0) throw sim::InputError("shardrun profile: no memory-bound kernel was measured");
  std::map<std::string, std::vector<sim::EfficiencySample>> gemm;
  std::vector<sim::EfficiencySample> memory;
  for (const auto& s : run.kernels) {
    const double busy = busy_seconds(s, f.launch_s);
    if (is_gemm(s))
      gemm[s.dtype].push_back({s.flops, s.flops / gemm_compute_seconds(s, busy, f.stream, share) / f.peak.at(s.dtype)});
    if (is_memory(s)) memory.push_back({s.bytes, s.bytes / busy / f.bandwidth});
  }
  for (const auto& [dtype, samples] : gemm) f.gemm[dtype] = sim::fit_efficiency_curve(samples, /*monotone=*/true);
  f.memory = sim::fit_efficiency_curve(memory, /*monotone=*/false);
  return f;
}

std::string gbps(double bytes_per_s) { return std::to_string(bytes_per_s / 1e9).substr(0, 6) + " GB/s"; }

// The profile being written: the hardware JSON, the source of each figure and the fits' residuals.
struct ProfileDoc {
  nlohmann::json j;
  nlohmann::json sources = nlohmann::json::object();
  nlohmann::json fit = nlohmann::json::object();
  std::string by;  // how every measured figure was taken, the prefix of its source
};

// The base profile renamed as measured, and how it was measured.
ProfileDoc start_profile(const ProfileRun& run) {
  ProfileDoc doc;
  doc.j = sim::to_json(run.base);
  doc.by = "shardrun profile on " + run.date + " (" + std::to_string(run.world_size) + " rank(s) x " +
           std::to_string(run.threads_per_rank) + " thread(s), all ranks measuring at once, the slowest rank's time" +
           (run.repeats > 1 ? ", median of " + std::to_string(run.repeats) + " passes" : "") + "): ";
  nlohmann::json& j = doc.j;
  j["name"] = run.name;
  j["measured"] = true;
  j["description"] = "Measured by shardrun profile on " + run.date + ": " + run.device_name + "; " +
                     std::to_string(run.ranks_on_node) + " rank(s) per node. Unmeasured figures from '" +
                     run.base_name + "'.";
  return doc;
}

// The device's best GEMM rate per dtype and its best memory-bound rate.
void write_peak_rates(const ProfileRun& run, const Fits& f, ProfileDoc& doc) {
  const std::string& by = doc.by;
  auto& sources = doc.sources;
  auto& d = doc.j["device"];
  d["name"] = run.device_name;
  for (const char* dt : {"fp32", "bf16", "fp16"}) {
    if (!f.peak.count(dt)) {
      sources["device.peak_TFLOPs." + std::string(dt)] = "not measured (dtype not profiled): from " + run.base_name;
      continue;
    }
    d["peak_TFLOPs"][dt] = f.peak.at(dt) / 1e12;
    sources["device.peak_TFLOPs." + std::string(dt)] = by + "best " + dt + " GEMM rate over the grid (samples.kernels)";
  }
  d["memory_bandwidth_bytes_per_s"] = f.bandwidth;
  sources["device.memory_bandwidth_bytes_per_s"] = by + "best memory-bound kernel rate, " + gbps(f.bandwidth);
}

// The efficiency curves: GEMMs per dtype, the CPU GEMMs' operand stream, memory-bound kernels.
void write_efficiency_curves(const ProfileRun& run, const Fits& f, ProfileDoc& doc) {
  const std::string& by = doc.by;
  auto& sources = doc.sources;
  auto& d = doc.j["device"];
  for (const auto& [dtype, g] : f.gemm) {
    const std::string how = by + "degree-" + std::to_string(g.degree) + " least-squares fit in log10(FLOP) of the " +
                            dtype + " GEMM samples / the best " + dtype + " rate (rms residual " +
                            std::to_string(g.rms_residual).substr(0, 5) + ")";
    d["gemm_efficiency_by_precision"][dtype] = sim::to_json(g.curve);
    sources["device.gemm_efficiency_by_precision." + dtype] = how;
    doc.fit["gemm_" + dtype + "_rms_residual"] = g.rms_residual;
    if (dtype != "fp32") continue;
    d["gemm_efficiency_by_flop"] = sim::to_json(g.curve);
    sources["device.gemm_efficiency_by_flop"] = "the fp32 curve (precisions without their own curve use it)";
  }
  if (f.stream.stream_Bps > 0) {
    d["gemm_operand_stream_bytes_per_s"] = f.stream.stream_Bps;
    sources["device.gemm_operand_stream_bytes_per_s"] =
        by +
        "t = FLOP / R + streamed bytes / B_stream fitted to the fp32 GEMMs with a weight 3x the cache "
        "(samples.kernels, kind gemm_stream; an operand streams when larger than the rank's share of the cache, " +
        std::to_string(cache_share_bytes(run) / 1048576.0).substr(0, 5) + " MiB): R " +
        std::to_string(f.stream.flop_rate / 1e9).substr(0, 6) + " GFLOP/s, " + gbps(f.stream.stream_Bps) + ", rms " +
        std::to_string(100 * f.stream.rms_relative_error).substr(0, 4) +
        " %; the GEMM curves are fitted to each sample's time less its streamed bytes / B_stream";
  }
  d["memory_efficiency_by_bytes"] = sim::to_json(f.memory.curve);
  sources["device.memory_efficiency_by_bytes"] =
      by + "degree-" + std::to_string(f.memory.degree) +
      " least-squares fit in log10(bytes) of the memory-bound samples / best (rms residual " +
      std::to_string(f.memory.rms_residual).substr(0, 5) + ")";
}

// The model's ops, the cache, the framework's host time, the attention kernel and the launch cost.
void write_ops_and_overheads(const ProfileRun& run, const Fits& f, ProfileDoc& doc) {
  const std::string& by = doc.by;
  auto& sources = doc.sources;
  auto& d = doc.j["device"];
  if (nlohmann::json ops = sim::to_json(fit_op_costs(run)); !ops.is_null()) {
    d["op_costs"] = ops;
    sources["device.op_costs"] =
        by +
        "each of the model's non-GEMM ops (executor/model/ops.hpp) timed forward and "
        "backward with autograd on, as training runs it, over a range of sizes: seconds per element by elements; "
        "backward cold (after a sweep of the cache) and, on a CPU, warm (right after its forward)";
  }
  if (!run.cuda && run.last_level_cache_bytes > 0) {
    d["last_level_cache_bytes"] = run.last_level_cache_bytes;
    sources["device.last_level_cache_bytes"] = run.last_level_cache_source;
  }
  if (nlohmann::json host = sim::to_json(run.host_overhead); !host.is_null()) {
    d["host_overhead_seconds"] = host;
    sources["device.host_overhead_seconds"] =
        by +
        "shardrun's own Transformer at micro shapes (hidden 32, sequence 64), "
        "forward and forward + backward of a micro-batch: per block (1 vs 3 blocks), adapter (LoRA r4 on 0 vs 7 "
        "linears), MoE expert (2 vs 8) and MoE layer; the host time beyond the kernels "
        "(profile/host_overhead_bench.hpp)";
  }
  d["fused_attention"] = run.fused_attention;
  sources["device.fused_attention"] =
      run.fused_attention
          ? "shardrun runs flash attention as PyTorch's fused scaled_dot_product_attention here, for models without "
            "attention dropout (model/transformer_forward.cpp, attention_run)"
          : "shardrun runs attention here as separate LibTorch ops, ring steps blockwise "
            "(model/transformer_forward.cpp, "
            "parallel/context_parallel.cpp): no fused kernel (" +
                run.fused_attention_reason + ")";
  d["kernel_launch_s"] = f.launch_s;
  sources["device.kernel_launch_s"] = by + "median time of a one-element add";
}

// The node's ranks, the host's cores and memory (a CPU rank's device memory is its share), and the
// host<->device link.
void write_node_and_host(const ProfileRun& run, ProfileDoc& doc) {
  const std::string& by = doc.by;
  nlohmann::json& j = doc.j;
  auto& sources = doc.sources;
  auto& d = j["device"];
  j["node"]["devices_per_node"] = run.ranks_on_node;
  sources["node.devices_per_node"] = by + "ranks on this node";
  j["host"]["cpu_cores"] = run.cpu_cores;
  if (run.host_memory_bytes > 0) j["host"]["memory_bytes"] = run.host_memory_bytes;
  sources["host.cpu_cores"] = by + "std::thread::hardware_concurrency";
  sources["host.memory_bytes"] = by + "sysconf physical pages";
  if (!run.cuda && run.host_memory_bytes > 0) {
    // A CPU rank's "device" memory is its share of the host's, less 15 % for the OS and MPI.
    d["memory_bytes"] = 0.85 * run.host_memory_bytes / std::max(1, run.ranks_on_node);
    sources["device.memory_bytes"] = by + "host memory / ranks on the node, less 15 % for the OS and MPI";
  }
  double h2d = 0;
  for (const auto& s : run.kernels)
    if (s.kind == "h2d" || s.kind == "d2h") h2d = std::max(h2d, s.bytes / s.seconds);
  if (h2d > 0) {
    j["host"]["link_bandwidth_bytes_per_s"] = h2d;
    sources["host.link_bandwidth_bytes_per_s"] = by + "best pinned host<->device copy, " + gbps(h2d);
  }
}

// Per collective kind, the measured bus bandwidth by buffer size: the simulator uses it in place of
// the single alpha-beta fit (reductions on the CPU run far below a plain copy).
nlohmann::json collective_busbw_curves(const ProfileRun& run) {
  std::map<std::string, std::map<double, double>> busbw;  // op -> bytes -> best wire bytes/s
  for (const auto& l : run.links)
    if (l.seconds > 0 && l.wire_bytes > 0) {
      double& best = busbw[l.op][l.bytes];
      best = std::max(best, l.wire_bytes / l.seconds);
    }
  nlohmann::json curves = nlohmann::json::object();
  for (const auto& [op, points] : busbw) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& [bytes, bw] : points) arr.push_back({bytes, bw});
    curves[op] = arr;
  }
  return curves;
}

// The intra-node link from the timed collectives (two or more): alpha-beta fit, bus bandwidth
// curves, the ranks' synchronisation skew and speed gap, and whether communication overlaps.
void write_intra_node_link(const ProfileRun& run, ProfileDoc& doc) {
  const std::string& by = doc.by;
  auto& sources = doc.sources;
  const sim::LinkFit link = sim::fit_link(run.links);
  auto& intra = doc.j["node"]["intra_node"];
  intra["bandwidth_bytes_per_s"] = link.bandwidth_Bps;
  intra["latency_s"] = link.latency_s;
  intra["efficiency"] = 1.0;
  const std::string how = by + "alpha-beta least-squares fit over all timed collectives (rms relative error " +
                          std::to_string(link.rms_relative_error).substr(0, 5) + ")";
  sources["node.intra_node.bandwidth_bytes_per_s"] = how + ", " + gbps(link.bandwidth_Bps);
  sources["node.intra_node.latency_s"] = how;
  sources["node.intra_node.efficiency"] = "1: the fitted bandwidth is already an achieved figure";
  doc.fit["link_rms_relative_error"] = link.rms_relative_error;
  intra["collective_busbw_bytes_per_s_by_bytes"] = collective_busbw_curves(run);
  sources["node.intra_node.collective_busbw_bytes_per_s_by_bytes"] =
      by + "each collective's wire bytes per rank / time, by buffer size (nccl-tests' bus bandwidth)";
  if (run.sync_skew_fraction >= 0) {
    intra["sync_skew_fraction"] = std::min(run.sync_skew_fraction, 0.99);
    sources["node.intra_node.sync_skew_fraction"] =
        by +
        "(compute phase + one-element all-reduce) - the slowest rank's phase - all-reduce, each a mean over "
        "200 interleaved iterations (a step pays every stall), relative to that phase (kernels are the slowest "
        "rank's too); the median of the passes";
  }
  if (run.rank_speed_gap_fraction >= 0) {
    intra["rank_speed_gap_fraction"] = run.rank_speed_gap_fraction;
    intra["rank_speed_gap_ranks"] = run.ranks_on_node;
    sources["node.intra_node.rank_speed_gap_fraction"] =
        by +
        "each kernel timing's slowest rank / fastest rank - 1 (every rank times each kernel at once; the "
        "kernels keep the slowest's), the median over all timings of all passes, over the " +
        std::to_string(run.ranks_on_node) + " ranks profiled at once";
  }
  // On CPU ranks MPI progresses a non-blocking collective only inside MPI calls, and the
  // rank's core is computing meanwhile: nothing overlaps. NCCL runs on its own stream.
  intra["compute_overlap"] = run.cuda ? 1.0 : 0.0;
  sources["node.intra_node.compute_overlap"] =
      run.cuda ? "NCCL kernels run on their own stream beside compute"
               : "CPU ranks under MPI: non-blocking collectives progress only inside MPI calls (no progress "
                 "thread) and each rank's core is busy computing, so communication does not hide behind compute";
}

// The sources and fits gathered, how the profile was taken (and how the machine drifted meanwhile),
// and the samples themselves.
void write_provenance(const ProfileRun& run, ProfileDoc& doc) {
  nlohmann::json& j = doc.j;
  j["sources"] = doc.sources;
  j["fit"] = doc.fit;
  j["profiled"] = {{"date", run.date},
                   {"world_size", run.world_size},
                   {"ranks_on_node", run.ranks_on_node},
                   {"threads_per_rank", run.threads_per_rank},
                   {"device", run.cuda ? "cuda" : "cpu"},
                   {"base", run.base_name},
                   {"repeats", run.repeats}};
  if (run.reference_start_s > 0 && run.reference_end_s > 0) {
    // How much the machine's speed drifted while it was profiled (kernel_bench.hpp).
    j["profiled"]["reference_gemm_seconds"] = {{"start", run.reference_start_s}, {"end", run.reference_end_s}};
    j["profiled"]["drift_fraction"] = run.reference_end_s / run.reference_start_s - 1;
  }
  j["samples"] = samples_json(run);
}

}  // namespace

nlohmann::json measured_profile_json(const ProfileRun& run) {
  const Fits f = fit_device(run);
  ProfileDoc doc = start_profile(run);
  write_peak_rates(run, f, doc);
  write_efficiency_curves(run, f, doc);
  write_ops_and_overheads(run, f, doc);
  write_node_and_host(run, doc);
  doc.fit["memory_rms_residual"] = f.memory.rms_residual;
  if (run.links.size() >= 2) write_intra_node_link(run, doc);
  else doc.sources["node.intra_node"] = "not measured (one rank): from " + run.base_name;
  write_provenance(run, doc);
  (void)sim::hardware_from_json(doc.j, run.name);  // what we write must load
  return std::move(doc.j);
}

}  // namespace shardplan::executor
