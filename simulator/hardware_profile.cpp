// Hardware profiles: parse (units -> SI once, here), overlay on a base, validate.
#include "hardware_profile.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "errors.hpp"
#include "json_fields.hpp"
#include "paths.hpp"

namespace shardplan::simulator {
namespace {

// Overlay `patch` on `target` (JSON merge patch, RFC 7396) — but a quantity given in another
// unit replaces the base's variant instead of conflicting with it.
void overlay(nlohmann::json& target, const nlohmann::json& patch) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& key = it.key();
    if (it->is_object() && target.contains(key) && target[key].is_object()) {
      overlay(target[key], *it);
      continue;
    }
    if (std::string base = quantity_base(key); !base.empty()) {
      std::vector<std::string> drop;
      for (auto t = target.begin(); t != target.end(); ++t)
        if (t.key() != key && quantity_base(t.key()) == base) drop.push_back(t.key());
      for (const auto& d : drop) target.erase(d);
    }
    if (it->is_null()) target.erase(key);
    else target[key] = *it;
  }
}

EfficiencyCurve parse_curve(const nlohmann::json& obj, const char* key, const JsonContext& ctx) {
  const auto& arr = require(obj, key, ctx);
  if (!arr.is_array() || arr.empty()) ctx.fail(key, "a non-empty array of [size, efficiency] pairs");
  EfficiencyCurve c;
  for (const auto& p : arr) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      ctx.fail(key, "[size, efficiency] pairs of numbers");
    double x = p[0].get<double>(), e = p[1].get<double>();
    if (!(x > 0)) ctx.fail(key, "sizes > 0");
    if (!(e > 0 && e <= 1)) ctx.fail(key, "efficiencies in (0, 1]");
    if (!c.log10_x.empty() && std::log10(x) <= c.log10_x.back()) ctx.fail(key, "sizes in ascending order");
    c.log10_x.push_back(std::log10(x));
    c.efficiency.push_back(e);
  }
  c.seal();
  return c;
}

// {"all_gather": [[bytes, bytes/s], ...], ...}: sizes ascending, bandwidths > 0.
void parse_busbw(const nlohmann::json& obj, LinkProfile& link, const JsonContext& ctx) {
  if (!obj.is_object()) ctx.fail("", "an object of collective name -> [[bytes, bytes/s], ...]");
  for (const auto& item : obj.items()) {
    const std::string& name = item.key();
    int kind = -1;
    for (int k = 0; k < 4; ++k)
      if (name == to_string(static_cast<CollectiveKind>(k))) kind = k;
    if (kind < 0) ctx.fail(name, "one of all_reduce, all_gather, reduce_scatter, send_recv");
    link.busbw_by_bytes[static_cast<std::size_t>(kind)] =
        parse_positive_curve(obj, name, "[bytes, bytes/s]", "sizes", ctx);
  }
}

LinkProfile parse_link(const nlohmann::json& obj, const JsonContext& ctx) {
  LinkProfile l;
  l.bandwidth_Bps = *get_quantity(obj, "bandwidth", Quantity::bytes_per_second, ctx);
  l.latency_s = *get_quantity(obj, "latency", Quantity::seconds, ctx, true, /*allow_zero=*/true);
  l.efficiency = get_number_or(obj, "efficiency", 1.0, ctx);
  if (!(l.efficiency > 0 && l.efficiency <= 1)) ctx.fail("efficiency", "a number in (0, 1]");
  return l;
}

// device.runtime_memory {"context_MiB", "communicator_MiB", "library_workspace_MiB"} (any unit
// key), else the lump device.runtime_reserved of older profiles, counted as context.
RuntimeMemory parse_runtime_memory(const nlohmann::json& d, const JsonContext& ctx) {
  RuntimeMemory r;
  auto it = d.find("runtime_memory");
  if (it == d.end() || it->is_null()) {
    r.context_bytes = get_quantity(d, "runtime_reserved", Quantity::bytes, ctx, false, true).value_or(0.0);
    return r;
  }
  if (!it->is_object())
    ctx.fail("runtime_memory", "an object {\"context_MiB\", \"communicator_MiB\", \"library_workspace_MiB\"}");
  const JsonContext rctx = ctx.child("runtime_memory");
  r.context_bytes = get_quantity(*it, "context", Quantity::bytes, rctx, false, true).value_or(0.0);
  r.communicator_bytes = get_quantity(*it, "communicator", Quantity::bytes, rctx, false, true).value_or(0.0);
  r.library_workspace_bytes = get_quantity(*it, "library_workspace", Quantity::bytes, rctx, false, true).value_or(0.0);
  return r;
}

DeviceProfile parse_device(const nlohmann::json& d, const JsonContext& ctx) {
  DeviceProfile dev;
  dev.name = get_string(d, "name", ctx);
  dev.memory_bytes = *get_quantity(d, "memory", Quantity::bytes, ctx);
  dev.memory_bandwidth_Bps = *get_quantity(d, "memory_bandwidth", Quantity::bytes_per_second, ctx);
  const auto& peak = require(d, "peak_TFLOPs", ctx);
  auto pctx = ctx.child("peak_TFLOPs");
  if (!peak.is_object()) ctx.fail("peak_TFLOPs", "an object {\"fp32\": .., \"fp16\": .., \"bf16\": ..}");
  for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16}) {
    double v = get_number_or(peak, to_string(p), 0.0, pctx);
    if (v < 0) pctx.fail(to_string(p), "a number >= 0 (0 = unsupported)");
    dev.peak_flops[static_cast<int>(p)] = v * 1e12;
  }
  if (dev.peak(Precision::fp32) <= 0 && dev.peak(Precision::bf16) <= 0 && dev.peak(Precision::fp16) <= 0)
    ctx.fail("peak_TFLOPs", "at least one precision with a peak > 0");
  const double fp8 = get_number_or(peak, "fp8", 0.0, pctx);
  if (fp8 < 0) pctx.fail("fp8", "a number >= 0 (0 = no FP8 tensor cores)");
  dev.peak_fp8_flops = fp8 * 1e12;
  dev.gemm_efficiency = parse_curve(d, "gemm_efficiency_by_flop", ctx);
  if (auto it = d.find("gemm_efficiency_fp8_by_flop"); it != d.end() && !it->is_null())
    dev.gemm_efficiency_fp8 = parse_curve(d, "gemm_efficiency_fp8_by_flop", ctx);
  dev.memory_efficiency = parse_curve(d, "memory_efficiency_by_bytes", ctx);
  if (auto it = d.find("gemm_efficiency_by_precision"); it != d.end() && !it->is_null()) {
    if (!it->is_object())
      ctx.fail("gemm_efficiency_by_precision", "an object {\"bf16\": [[FLOP, efficiency], ...], ...}");
    auto cctx = ctx.child("gemm_efficiency_by_precision");
    for (const auto& [key, curve] : it->items()) {
      int index = -1;
      for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16})
        if (key == to_string(p)) index = static_cast<int>(p);
      if (index < 0) cctx.fail(key.c_str(), "a precision name: fp32, fp16 or bf16");
      dev.gemm_efficiency_by_precision[static_cast<std::size_t>(index)] = parse_curve(*it, key.c_str(), cctx);
    }
  }
  dev.runtime = get_enum_or(d, "runtime", DeviceRuntime::cuda, ctx);
  dev.kernel_launch_s = get_quantity(d, "kernel_launch", Quantity::seconds, ctx, false, true).value_or(0.0);
  dev.runtime_memory = parse_runtime_memory(d, ctx);
  dev.op_costs = parse_op_costs(d, ctx);
  dev.flash_attention = parse_flash_attention_curves(d, ctx);
  if (auto it = d.find("fused_attention"); it != d.end() && !it->is_null()) {
    if (!it->is_boolean())
      ctx.fail("fused_attention", "true or false (whether flash attention runs as one fused kernel)");
    dev.fused_attention = it->get<bool>();
  }
  dev.last_level_cache_bytes = get_quantity(d, "last_level_cache", Quantity::bytes, ctx, false, true).value_or(0.0);
  dev.gemm_operand_stream_Bps =
      get_quantity(d, "gemm_operand_stream", Quantity::bytes_per_second, ctx, false, true).value_or(0.0);
  dev.flash_attention_v1_slowdown = parse_flash_v1_slowdown(d, ctx);
  dev.host_overhead = parse_host_overhead(d, ctx);
  return dev;
}

IntraTopology parse_topology(const nlohmann::json& obj, const JsonContext& ctx) {
  std::string t = get_string(obj, "topology", ctx);
  if (t == "switch") return IntraTopology::switch_fabric;
  if (t == "pcie") return IntraTopology::pcie;
  if (t == "all_to_all") return IntraTopology::all_to_all;
  if (t == "torus" || t == "ring") return IntraTopology::torus;
  ctx.fail("topology", "\"switch\", \"pcie\", \"all_to_all\" or \"torus\"");
}

ResilienceProfile parse_resilience(const nlohmann::json& r, const JsonContext& ctx) {
  ResilienceProfile out;
  if (!r.is_object())
    throw InputError(ctx.file + ": field '" + ctx.prefix +
                     "': expected an object {node_mtbf_hours, checkpoint_write_GBps, restart_s}");
  const double hours = get_number_or(r, "node_mtbf_hours", kDefaultNodeMtbfHours, ctx);
  if (!(hours > 0)) ctx.fail("node_mtbf_hours", "a number of hours > 0");
  out.node_mtbf_s = hours * 3600;
  if (auto bw = get_quantity(r, "checkpoint_write", Quantity::bytes_per_second, ctx, false))
    out.checkpoint_write_Bps = *bw;
  if (auto s = get_quantity(r, "restart", Quantity::seconds, ctx, false, true)) out.restart_s = *s;
  return out;
}

// A chip that the framework drives as k logical devices (trn1: 2 NeuronCore-v2 per Trainium, and
// the Neuron SDK counts tp/pp/dp in NeuronCores; AWS Neuron docs, "Trainium architecture"): each
// gets 1/k of the chip's memory, bandwidth, FLOP/s, runtime reserve and links; a node has k times
// the devices. The resolved profile (to_json) holds the per-logical-device figures.
void split_into_logical_devices(HardwareProfile& hw, int k) {
  DeviceProfile& d = hw.device;
  d.memory_bytes /= k;
  d.memory_bandwidth_Bps /= k;
  for (double& p : d.peak_flops) p /= k;
  d.peak_fp8_flops /= k;
  d.runtime_memory.context_bytes /= k;
  d.runtime_memory.communicator_bytes /= k;
  d.runtime_memory.library_workspace_bytes /= k;
  hw.node.devices_per_node *= k;
  hw.node.intra.bandwidth_Bps /= k;
  hw.host.link_bandwidth_Bps /= k;
}

void scale_curve(EfficiencyCurve& c, double k) {
  for (double& v : c.efficiency) v *= k;
}

// "fitted": {"compute_efficiency_scale", "fp8_compute_efficiency_scale", "memory_efficiency_scale",
// "network_efficiency_scale", "source", "applied"}: see FittedTerms. A resolved profile (to_json) says "applied": true.
FittedTerms parse_fitted(const nlohmann::json& f, const JsonContext& ctx, bool* applied) {
  if (!f.is_object()) ctx.fail("fitted", "an object of fitted scales");
  const JsonContext fctx = ctx.child("fitted");
  FittedTerms t;
  t.present = true;
  auto scale = [&](const char* key) {
    const double v = get_number_or(f, key, 1.0, fctx);
    if (!(v > 0.05 && v < 20)) fctx.fail(key, "a factor between 0.05 and 20");
    return v;
  };
  t.compute_efficiency_scale = scale("compute_efficiency_scale");
  t.fp8_compute_efficiency_scale = scale("fp8_compute_efficiency_scale");
  t.memory_efficiency_scale = scale("memory_efficiency_scale");
  t.network_efficiency_scale = scale("network_efficiency_scale");
  t.source = get_string(f, "source", fctx);
  *applied = get_bool_or(f, "applied", false, fctx);
  return t;
}

void apply_fitted(HardwareProfile& hw) {
  const FittedTerms& f = hw.fitted;
  DeviceProfile& d = hw.device;
  scale_curve(d.gemm_efficiency, f.compute_efficiency_scale);
  for (auto& c : d.gemm_efficiency_by_precision) scale_curve(c, f.compute_efficiency_scale);
  scale_curve(d.gemm_efficiency_fp8, f.fp8_compute_efficiency_scale);
  for (auto& by_mask : d.flash_attention.by_mask)
    for (auto& hd : by_mask) {
      scale_curve(hd.forward, f.compute_efficiency_scale);
      scale_curve(hd.backward, f.compute_efficiency_scale);
    }
  scale_curve(d.memory_efficiency, f.memory_efficiency_scale);
  hw.node.intra.efficiency *= f.network_efficiency_scale;
  for (auto& c : hw.node.intra.busbw_by_bytes) scale_curve(c, f.network_efficiency_scale);
  hw.network.efficiency *= f.network_efficiency_scale;
}

CalibrationInfo parse_calibration(const nlohmann::json& j, const HardwareProfile& hw, const JsonContext& ctx) {
  CalibrationInfo out;
  const auto it = j.find("calibration");
  if (it == j.end() || it->is_null()) {
    out.calibrated = hw.fitted.present || hw.measured;
    out.rule = hw.fitted.present ? hw.fitted.source
               : hw.measured     ? "measured by `shardrun profile` on the machine itself"
                                 : "no fitted terms: its curves are datasheet figures and engineering estimates "
                                   "(see its sources)";
    return out;
  }
  if (!it->is_object()) ctx.fail("calibration", "an object {\"status\", \"rule\"}");
  const JsonContext cctx = ctx.child("calibration");
  const std::string status = get_string(*it, "status", cctx);
  if (status != "calibrated" && status != "uncalibrated") cctx.fail("status", "\"calibrated\" or \"uncalibrated\"");
  out.calibrated = status == "calibrated";
  out.rule = get_string(*it, "rule", cctx);
  if (out.rule.empty()) cctx.fail("rule", "a sentence saying where the efficiency terms come from");
  return out;
}

HardwareProfile parse_profile(const nlohmann::json& j, const JsonContext& ctx) {
  HardwareProfile hw;
  hw.name = get_string(j, "name", ctx);
  hw.description = get_string_or(j, "description", "", ctx);
  hw.measured = get_bool_or(j, "measured", false, ctx);
  hw.device = parse_device(require(j, "device", ctx), ctx.child("device"));
  const auto& node = require(j, "node", ctx);
  auto nctx = ctx.child("node");
  hw.node.devices_per_node = static_cast<int>(get_positive_int(node, "devices_per_node", nctx));
  const auto& intra = require(node, "intra_node", nctx);
  auto ictx = nctx.child("intra_node");
  hw.node.topology = parse_topology(intra, ictx);
  hw.node.intra = parse_link(intra, ictx);
  hw.node.intra.compute_overlap = get_number_or(intra, "compute_overlap", 1.0, ictx);
  if (!(hw.node.intra.compute_overlap >= 0 && hw.node.intra.compute_overlap <= 1))
    ictx.fail("compute_overlap", "a fraction in [0, 1]");
  hw.node.intra.sync_skew_fraction = get_number_or(intra, "sync_skew_fraction", 0.0, ictx);
  if (!(hw.node.intra.sync_skew_fraction >= 0 && hw.node.intra.sync_skew_fraction < 1))
    ictx.fail("sync_skew_fraction", "a fraction in [0, 1)");
  hw.node.intra.rank_speed_gap_fraction = get_number_or(intra, "rank_speed_gap_fraction", 0.0, ictx);
  if (!(hw.node.intra.rank_speed_gap_fraction >= 0 && hw.node.intra.rank_speed_gap_fraction <= 10))
    ictx.fail("rank_speed_gap_fraction", "a fraction from 0 to 10");
  const long long gap_ranks = get_int_or(intra, "rank_speed_gap_ranks", 0, ictx);
  if (hw.node.intra.rank_speed_gap_fraction > 0 && (gap_ranks < 2 || gap_ranks > 4096))
    ictx.fail("rank_speed_gap_ranks",
              "the number of ranks profiled at once (2 to 4096) beside rank_speed_gap_fraction");
  hw.node.intra.rank_speed_gap_ranks = static_cast<int>(std::clamp<long long>(gap_ranks, 0, 4096));
  if (auto it = intra.find("collective_busbw_bytes_per_s_by_bytes"); it != intra.end())
    parse_busbw(*it, hw.node.intra, ictx.child("collective_busbw_bytes_per_s_by_bytes"));
  hw.network = parse_link(require(j, "network", ctx), ctx.child("network"));
  const auto& host = require(j, "host", ctx);
  const long long logical = get_int_or(node, "logical_devices_per_device", 1, nctx);
  if (logical < 1 || logical > 64) nctx.fail("logical_devices_per_device", "a whole number from 1 to 64");
  auto hctx = ctx.child("host");
  hw.host.memory_bytes = *get_quantity(host, "memory", Quantity::bytes, hctx);
  hw.host.memory_bandwidth_Bps = *get_quantity(host, "memory_bandwidth", Quantity::bytes_per_second, hctx);
  hw.host.link_bandwidth_Bps = *get_quantity(host, "link_bandwidth", Quantity::bytes_per_second, hctx);
  hw.host.cpu_cores = static_cast<int>(get_positive_int(host, "cpu_cores", hctx));
  if (auto it = j.find("price"); it != j.end()) {
    auto pctx = ctx.child("price");
    hw.price.usd_per_hour = get_number_or(*it, "usd_per_hour", 0.0, pctx);
    if (hw.price.usd_per_hour < 0) pctx.fail("usd_per_hour", "a number >= 0");
    hw.price.as_of = get_string_or(*it, "as_of", "", pctx);
    hw.price.note = get_string_or(*it, "note", "", pctx);
  }
  if (auto it = j.find("resilience"); it != j.end()) hw.resilience = parse_resilience(*it, ctx.child("resilience"));
  if (logical > 1) split_into_logical_devices(hw, static_cast<int>(logical));
  if (auto it = j.find("fitted"); it != j.end() && !it->is_null()) {
    bool applied = false;
    hw.fitted = parse_fitted(*it, ctx, &applied);
    if (!applied) apply_fitted(hw);
  }
  hw.calibration = parse_calibration(j, hw, ctx);
  return hw;
}

// A file may give a quantity in one unit only, base or not.
void check_unit_variants(const nlohmann::json& obj, const JsonContext& ctx) {
  if (!obj.is_object()) return;
  std::set<std::string> seen;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it->is_object()) check_unit_variants(*it, ctx.child(it.key()));
    const std::string base = quantity_base(it.key());
    if (base.empty() || it->is_null()) continue;
    if (!seen.insert(base).second) ctx.fail(base + "_*", "only one unit variant of '" + base + "_*'");
  }
}

// A file may give a quantity in one unit only, in every section that holds quantities.
void check_sections(const nlohmann::json& j, const std::string& file) {
  for (const char* section : {"device", "node", "network", "host", "price", "resilience"})
    if (auto s = j.find(section); s != j.end()) check_unit_variants(*s, JsonContext{file, section});
}

std::string builtin_path(const std::string& name) { return data_dir() + "/hardware_profiles/" + name + ".json"; }

// The file of a built-in profile name or a path; InputError naming --hardware when there is none.
std::string profile_file(const std::string& name_or_path) {
  if (looks_like_path(name_or_path)) {
    if (!std::filesystem::exists(name_or_path))
      throw InputError("--hardware: file '" + name_or_path + "' does not exist");
    return name_or_path;
  }
  std::string path = builtin_path(name_or_path);
  if (!std::filesystem::exists(path)) {
    std::string names;
    for (const auto& n : builtin_hardware_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError("--hardware: unknown profile '" + name_or_path + "' (expected a built-in name: " + names +
                     "; or a path to a profile JSON)");
  }
  return path;
}

nlohmann::json resolve_json(const std::string& path, std::set<std::string>& seen) {
  std::string canon = std::filesystem::weakly_canonical(path).string();
  if (!seen.insert(canon).second) throw InputError(path + ": field 'base': circular base chain");
  nlohmann::json j = read_json_file(path);
  if (!j.is_object()) throw InputError(path + ": expected a JSON object (a hardware profile)");
  check_sections(j, path);
  auto it = j.find("base");
  if (it == j.end() || it->is_null()) return j;
  if (!it->is_string()) throw InputError(path + ": field 'base': expected a profile name or path");
  std::string base = it->get<std::string>();
  std::string base_path =
      looks_like_path(base) ? (std::filesystem::path(path).parent_path() / base).string() : builtin_path(base);
  if (!std::filesystem::exists(base_path)) throw InputError(path + ": field 'base': unknown profile '" + base + "'");
  nlohmann::json merged = resolve_json(base_path, seen);
  merged.erase("sources");  // the overlay's figures need their own sources
  nlohmann::json patch = j;
  patch.erase("base");
  overlay(merged, patch);
  if (j.contains("sources")) merged["sources"] = j["sources"];
  return merged;
}

}  // namespace

const char* to_string(Precision p) { return name_of(p); }

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::send_recv:
      return "send_recv";
  }
  return "?";
}

const char* to_string(IntraTopology t) {
  switch (t) {
    case IntraTopology::switch_fabric:
      return "switch";
    case IntraTopology::pcie:
      return "pcie";
    case IntraTopology::all_to_all:
      return "all_to_all";
    case IntraTopology::torus:
      return "torus";
  }
  return "?";
}

HardwareProfile hardware_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object (a hardware profile)");
  if (j.contains("base") && !j["base"].is_null())
    throw InputError(source + ": field 'base': expected a resolved profile (no base) here");
  check_sections(j, source);
  HardwareProfile hw = parse_profile(j, JsonContext{source, ""});
  hw.source_file = source;
  return hw;
}

nlohmann::json to_json(const HardwareProfile& hw) {
  const auto& d = hw.device;
  nlohmann::json j = {
      {"schema", "shardplan.hardware/1"},
      {"name", hw.name},
      {"description", hw.description},
      {"measured", hw.measured},
      {"device",
       {{"name", d.name},
        {"runtime", name_of(d.runtime)},
        {"memory_bytes", d.memory_bytes},
        {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_Bps},
        {"peak_TFLOPs",
         {{"fp32", d.peak(Precision::fp32) / 1e12},
          {"fp16", d.peak(Precision::fp16) / 1e12},
          {"bf16", d.peak(Precision::bf16) / 1e12}}},
        {"gemm_efficiency_by_flop", to_json(d.gemm_efficiency)},
        {"memory_efficiency_by_bytes", to_json(d.memory_efficiency)},
        {"kernel_launch_s", d.kernel_launch_s},
        {"runtime_memory",
         {{"context_bytes", d.runtime_memory.context_bytes},
          {"communicator_bytes", d.runtime_memory.communicator_bytes},
          {"library_workspace_bytes", d.runtime_memory.library_workspace_bytes}}}}},
      {"node",
       {{"devices_per_node", hw.node.devices_per_node},
        {"intra_node",
         {{"topology", to_string(hw.node.topology)},
          {"bandwidth_bytes_per_s", hw.node.intra.bandwidth_Bps},
          {"latency_s", hw.node.intra.latency_s},
          {"efficiency", hw.node.intra.efficiency},
          {"compute_overlap", hw.node.intra.compute_overlap},
          {"sync_skew_fraction", hw.node.intra.sync_skew_fraction},
          {"rank_speed_gap_fraction", hw.node.intra.rank_speed_gap_fraction},
          {"rank_speed_gap_ranks", hw.node.intra.rank_speed_gap_ranks}}}}},
      {"network",
       {{"bandwidth_bytes_per_s", hw.network.bandwidth_Bps},
        {"latency_s", hw.network.latency_s},
        {"efficiency", hw.network.efficiency}}},
      {"host",
       {{"memory_bytes", hw.host.memory_bytes},
        {"memory_bandwidth_bytes_per_s", hw.host.memory_bandwidth_Bps},
        {"link_bandwidth_bytes_per_s", hw.host.link_bandwidth_Bps},
        {"cpu_cores", hw.host.cpu_cores}}},
      {"price", {{"usd_per_hour", hw.price.usd_per_hour}, {"as_of", hw.price.as_of}, {"note", hw.price.note}}},
      {"calibration",
       {{"status", hw.calibration.calibrated ? "calibrated" : "uncalibrated"}, {"rule", hw.calibration.rule}}},
      {"resilience",
       {{"node_mtbf_hours", hw.resilience.node_mtbf_s / 3600},
        {"checkpoint_write_bytes_per_s", hw.resilience.checkpoint_write_Bps},
        {"restart_s", hw.resilience.restart_s}}}};
  for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16}) {
    const auto& c = d.gemm_efficiency_by_precision[static_cast<std::size_t>(p)];
    if (!c.log10_x.empty()) j["device"]["gemm_efficiency_by_precision"][to_string(p)] = to_json(c);
  }
  if (d.has_fp8()) j["device"]["peak_TFLOPs"]["fp8"] = d.peak_fp8_flops / 1e12;
  if (!d.gemm_efficiency_fp8.log10_x.empty())
    j["device"]["gemm_efficiency_fp8_by_flop"] = to_json(d.gemm_efficiency_fp8);
  if (nlohmann::json ops = to_json(d.op_costs); !ops.is_null()) j["device"]["op_costs"] = ops;
  if (nlohmann::json fa = to_json(d.flash_attention); !fa.is_null())
    j["device"]["flash_attention_efficiency_by_seq_len"] = fa;
  if (nlohmann::json host = to_json(d.host_overhead); !host.is_null()) j["device"]["host_overhead_seconds"] = host;
  if (!d.fused_attention) j["device"]["fused_attention"] = false;
  if (d.last_level_cache_bytes > 0) j["device"]["last_level_cache_bytes"] = d.last_level_cache_bytes;
  if (d.gemm_operand_stream_Bps > 0) j["device"]["gemm_operand_stream_bytes_per_s"] = d.gemm_operand_stream_Bps;
  if (nlohmann::json v1 = to_json(d.flash_attention_v1_slowdown); !v1.is_null())
    j["device"]["flash_attention_v1_slowdown"] = v1;
  nlohmann::json busbw = nlohmann::json::object();
  for (int kind = 0; kind < 4; ++kind)
    if (const auto* c = hw.node.intra.busbw(static_cast<CollectiveKind>(kind)))
      busbw[to_string(static_cast<CollectiveKind>(kind))] = to_json(*c);
  if (!busbw.empty()) j["node"]["intra_node"]["collective_busbw_bytes_per_s_by_bytes"] = busbw;
  if (hw.fitted.present)  // the curves above already carry the scales
    j["fitted"] = {{"compute_efficiency_scale", hw.fitted.compute_efficiency_scale},
                   {"fp8_compute_efficiency_scale", hw.fitted.fp8_compute_efficiency_scale},
                   {"memory_efficiency_scale", hw.fitted.memory_efficiency_scale},
                   {"network_efficiency_scale", hw.fitted.network_efficiency_scale},
                   {"source", hw.fitted.source},
                   {"applied", true}};
  return j;
}

HardwareProfile load_hardware_file(const std::string& path) {
  std::set<std::string> seen;
  nlohmann::json j = resolve_json(path, seen);
  HardwareProfile hw = parse_profile(j, JsonContext{path, ""});
  hw.source_file = path;
  return hw;
}

HardwareProfile load_hardware_with_overrides(const std::string& name_or_path, const nlohmann::json& overrides,
                                             const std::string& source) {
  const std::string path = profile_file(name_or_path);
  if (overrides.is_null() || overrides.empty()) return load_hardware_file(path);
  if (!overrides.is_object()) throw InputError(source + ": expected an object (profile fields to override)");
  std::set<std::string> seen;
  nlohmann::json j = resolve_json(path, seen);
  check_sections(overrides, source);
  overlay(j, overrides);
  HardwareProfile hw = parse_profile(j, JsonContext{source, ""});
  hw.source_file = path;
  return hw;
}

HardwareProfile load_hardware(const std::string& name_or_path) {
  return load_hardware_file(profile_file(name_or_path));
}

std::vector<std::string> builtin_hardware_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/hardware_profiles", ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace shardplan::simulator
