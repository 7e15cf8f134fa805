#include "cli_parse.hpp"

#include <algorithm>
#include <sstream>

#include "simulator/errors.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

namespace {

int to_int(const std::string& flag, const std::string& item, const std::string& whole) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(item, &used);
    if (used == item.size()) return v;
  } catch (const std::exception&) {
  }
  throw sim::InputError(flag + ": expected comma-separated integers, got '" + whole + "'");
}

}  // namespace

std::vector<int> parse_int_list(const std::string& flag, const std::string& s, bool allow_range) {
  std::vector<int> out;
  const auto dash = s.find('-');
  if (allow_range && dash != std::string::npos && dash > 0) {
    const int lo = to_int(flag, s.substr(0, dash), s), hi = to_int(flag, s.substr(dash + 1), s);
    if (lo < 1 || hi < lo) throw sim::InputError(flag + ": expected a range LO-HI with 1 <= LO <= HI, got '" + s + "'");
    for (int v = lo; v <= hi; v *= 2) out.push_back(v);
    return out;
  }
  for (const auto& item : split_list(s)) out.push_back(to_int(flag, item, s));
  if (out.empty()) throw sim::InputError(flag + ": expected at least one value");
  for (int v : out)
    if (v < 0) throw sim::InputError(flag + ": expected values >= 0, got '" + s + "'");
  return out;
}

std::vector<sim::PipelineSchedule> parse_schedules(const std::string& s) {
  std::vector<sim::PipelineSchedule> out;
  for (const auto& x : split_list(s)) {
    if (x == "1f1b") out.push_back(sim::PipelineSchedule::one_f_one_b);
    else if (x == "gpipe") out.push_back(sim::PipelineSchedule::gpipe);
    else if (x == "interleaved") out.push_back(sim::PipelineSchedule::interleaved);
    else throw sim::InputError("--schedules: expected gpipe, 1f1b or interleaved, got '" + x + "'");
  }
  if (out.empty()) throw sim::InputError("--schedules: expected at least one schedule");
  return out;
}

std::vector<sim::Recompute> parse_recomputes(const std::string& s) {
  std::vector<sim::Recompute> out;
  for (const auto& x : split_list(s)) {
    if (x == "none") out.push_back(sim::Recompute::none);
    else if (x == "selective") out.push_back(sim::Recompute::selective);
    else if (x == "full") out.push_back(sim::Recompute::full);
    else throw sim::InputError("--recompute: expected none, selective or full, got '" + x + "'");
  }
  if (out.empty()) throw sim::InputError("--recompute: expected at least one mode");
  return out;
}

std::vector<sim::Precision> parse_precisions(const std::string& s) {
  std::vector<sim::Precision> out;
  for (const auto& x : split_list(s)) {
    if (x == "bf16") out.push_back(sim::Precision::bf16);
    else if (x == "fp16") out.push_back(sim::Precision::fp16);
    else if (x == "fp32") out.push_back(sim::Precision::fp32);
    else throw sim::InputError("--precision: expected bf16, fp16 or fp32, got '" + x + "'");
  }
  if (out.empty()) throw sim::InputError("--precision: expected at least one precision");
  return out;
}

sim::MixedPrecision parse_mixed_precision(const std::string& s) {
  if (const auto m = sim::mixed_precision_from_string(s)) return *m;
  throw sim::InputError("--mixed-precision: expected master_weights or autocast, got '" + s + "'");
}

sim::GradAccumDtype parse_grad_accum_dtype(const std::string& s) {
  if (const auto d = sim::grad_accum_dtype_from_string(s)) return *d;
  throw sim::InputError("--grad-accum-dtype: expected param or fp32, got '" + s + "'");
}

sim::Fusion parse_fusion(const std::string& s) {
  if (const auto f = sim::fusion_from_string(s)) return *f;
  throw sim::InputError("--fusion: expected eager or megatron, got '" + s + "'");
}

sim::AttentionKind parse_attention(const std::string& s) {
  if (const auto k = sim::attention_kind_from_string(s)) return *k;
  throw sim::InputError("--attention: expected flash, flash1 or eager, got '" + s + "'");
}

std::vector<sim::Fp8Recipe> parse_fp8_recipes(const std::string& s) {
  std::vector<sim::Fp8Recipe> out;
  for (const auto& x : split_list(s)) {
    const auto r = sim::fp8_recipe_from_string(x);
    if (!r) throw sim::InputError("--fp8: expected none, delayed, tensorwise or blockwise, got '" + x + "'");
    if (std::find(out.begin(), out.end(), *r) == out.end()) out.push_back(*r);
  }
  if (out.empty()) throw sim::InputError("--fp8: expected at least one of none, delayed, tensorwise, blockwise");
  return out;
}

std::vector<sim::Fp8Recipe> fp8_search_list(const std::string& s, const sim::HardwareProfile& hw) {
  if (s == "auto") {
    if (hw.device.has_fp8()) return {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
    return {sim::Fp8Recipe::none};
  }
  std::vector<sim::Fp8Recipe> out = parse_fp8_recipes(s);
  for (sim::Fp8Recipe r : out)
    if (r != sim::Fp8Recipe::none && !hw.device.has_fp8())
      throw sim::InputError("--fp8: the device of '" + hw.name + "' (" + hw.device.name +
                            ") has no FP8 tensor cores: expected none or auto, got '" + s + "'");
  return out;
}

std::vector<int> cp_search_list(const std::string& s, int seq_len) {
  if (s == "auto") return seq_len >= 8192 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1};
  return parse_int_list("--cp", s, false);
}

std::vector<int> ep_search_list(const std::string& s, const sim::ModelSpec& m) {
  if (s != "auto") {
    const std::vector<int> out = parse_int_list("--ep", s, false);
    for (int ep : out)
      if (ep > 1 && !m.is_moe())
        throw sim::InputError("--ep: expected 1 or auto: model '" + m.name + "' has no experts, got '" + s + "'");
    return out;
  }
  std::vector<int> out{1};
  for (int ep = 2; m.is_moe() && ep <= m.moe.num_experts; ep *= 2)
    if (m.moe.num_experts % ep == 0) out.push_back(ep);
  return out;
}

std::pair<sim::ClusterSpec, sim::ParallelConfig> parse_config_spec(const std::string& spec, const sim::ModelSpec& m,
                                                                   const sim::HardwareProfile& hw,
                                                                   const planner::SearchSpace& space,
                                                                   const planner::Constraints& c) {
  sim::ClusterSpec cluster{hw, space.node_counts.front(), space.devices_per_node};
  sim::ParallelConfig cfg;
  cfg.seq_len = space.seq_len;
  cfg.lora = space.lora;
  cfg.mixed_precision = space.mixed_precision;
  cfg.attention = space.attention;
  cfg.fusion = space.fusion;
  cfg.cp_kind = space.cp_kind;
  cfg.rank_order = space.rank_order;
  cfg.memory_headroom = c.memory_headroom;
  cfg.global_batch_size = space.global_batch_sizes.front();
  bool dp_given = false;
  for (const auto& item : split_list(spec)) {
    const auto eq = item.find('=');
    const std::string k = item.substr(0, eq), v = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto num = [&] { return to_int("--why", v, spec); };
    if (k == "nodes") cluster.nodes = num();
    else if (k == "tp") cfg.tp = num();
    else if (k == "pp") cfg.pp = num();
    else if (k == "dp") { cfg.dp = num(); dp_given = true; }
    else if (k == "zero") cfg.zero_stage = num();
    else if (k == "shard") cfg.sharding_degree = num();
    else if (k == "mbs") cfg.micro_batch_size = num();
    else if (k == "gbs") cfg.global_batch_size = num();
    else if (k == "v") cfg.virtual_stages = num();
    else if (k == "schedule") cfg.schedule = parse_schedules(v).front();
    else if (k == "recompute") cfg.recompute = parse_recomputes(v).front();
    else if (k == "precision") cfg.precision = parse_precisions(v).front();
    else if (k == "attention") {
      const auto a = sim::attention_kind_from_string(v);
      if (!a) throw sim::InputError("--why: attention=" + v + ": expected flash or eager");
      cfg.attention = *a;
    }
    else if (k == "fp8") cfg.fp8 = parse_fp8_recipes(v).front();
    else if (k == "cp") cfg.cp = num();
    else if (k == "ep") cfg.ep = num();
    else if (k == "etp") cfg.etp = num();
    else if (k == "sp") cfg.sequence_parallel = true;
    else if (k == "offload-optimizer") cfg.offload_optimizer = true;
    else if (k == "offload-activations") cfg.offload_activations = true;
    else throw sim::InputError("--why: unknown field '" + k + "' (expected nodes, tp, pp, dp, zero, shard, mbs, gbs, "
                               "schedule, v, recompute, precision, attention, fp8, cp, ep, etp, sp, offload-optimizer, "
                               "offload-activations)");
  }
  cfg.tp_comm_overlap = space.tp_comm_overlap && cfg.sequence_parallel;
  cfg.grad_accum_dtype = sim::grad_accum_for(cfg, space.grad_accum_dtype);
  if (!dp_given && cfg.tp > 0 && cfg.pp > 0 && cfg.cp > 0)
    cfg.dp = std::max(1, cluster.devices() / (cfg.tp * cfg.cp * cfg.pp));
  if (cfg.pp > 0 && m.num_layers % cfg.pp) cfg.partition = {};  // validate_config explains
  return {cluster, cfg};
}

}  // namespace shardplan::cli
