#include "space_parse.hpp"

#include <algorithm>
#include <sstream>

#include "simulator/errors.hpp"

namespace shardplan::planner {

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
  } catch (const std::exception&) {}
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

namespace {

// A comma-separated list of a table's names (enum_names.hpp).
template <typename E>
std::vector<E> parse_names(const std::string& flag, const std::string& s, const char* noun) {
  std::vector<E> out;
  for (const auto& x : split_list(s)) out.push_back(parse_name<E>(flag, x));
  if (out.empty()) throw sim::InputError(flag + ": expected at least one " + noun);
  return out;
}

}  // namespace

std::vector<sim::PipelineSchedule> parse_schedules(const std::string& s) {
  return parse_names<sim::PipelineSchedule>("--schedules", s, "schedule");
}

std::vector<sim::Recompute> parse_recomputes(const std::string& s) {
  return parse_names<sim::Recompute>("--recompute", s, "mode");
}

std::vector<sim::Precision> parse_precisions(const std::string& s) {
  return parse_names<sim::Precision>("--precision", s, "precision");
}

sim::MixedPrecision parse_mixed_precision(const std::string& s) {
  return parse_name<sim::MixedPrecision>("--mixed-precision", s);
}

sim::GradAccumDtype parse_grad_accum_dtype(const std::string& s) {
  return parse_name<sim::GradAccumDtype>("--grad-accum-dtype", s);
}

sim::Fusion parse_fusion(const std::string& s) { return parse_name<sim::Fusion>("--fusion", s); }

sim::AttentionKind parse_attention(const std::string& s) { return parse_name<sim::AttentionKind>("--attention", s); }

std::vector<sim::Fp8Recipe> parse_fp8_recipes(const std::string& s) {
  std::vector<sim::Fp8Recipe> out;
  for (const auto& x : split_list(s)) {
    const auto r = parse_name<sim::Fp8Recipe>("--fp8", x);
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  if (out.empty()) throw sim::InputError("--fp8: expected at least one of " + sim::enum_names_list<sim::Fp8Recipe>());
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
                                                                   const SearchSpace& space, const Constraints& c) {
  sim::ClusterSpec cluster{hw, space.node_counts.front(), space.devices_per_node};
  sim::ParallelConfig cfg = space.base_config(c);
  cfg.global_batch_size = space.global_batch_sizes.front();
  bool dp_given = false;
  for (const auto& item : split_list(spec)) {
    const auto eq = item.find('=');
    const std::string k = item.substr(0, eq), v = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto num = [&] { return to_int("--why", v, spec); };
    if (k == "nodes") cluster.nodes = num();
    else if (k == "tp") cfg.tp = num();
    else if (k == "pp") cfg.pp = num();
    else if (k == "dp") {
      cfg.dp = num();
      dp_given = true;
    } else if (k == "zero") cfg.zero_stage = num();
    else if (k == "shard") cfg.sharding_degree = num();
    else if (k == "mbs") cfg.micro_batch_size = num();
    else if (k == "gbs") cfg.global_batch_size = num();
    else if (k == "v") cfg.virtual_stages = num();
    else if (k == "schedule") cfg.schedule = parse_schedules(v).front();
    else if (k == "recompute") cfg.recompute = parse_recomputes(v).front();
    else if (k == "precision") cfg.precision = parse_precisions(v).front();
    else if (k == "attention") cfg.attention = parse_name<sim::AttentionKind>("--why: attention", v);
    else if (k == "fp8") cfg.fp8 = parse_fp8_recipes(v).front();
    else if (k == "cp") cfg.cp = num();
    else if (k == "ep") cfg.ep = num();
    else if (k == "etp") cfg.etp = num();
    else if (k == "sp") cfg.sequence_parallel = true;
    else if (k == "offload-optimizer") cfg.offload_optimizer = true;
    else if (k == "offload-activations") cfg.offload_activations = true;
    else
      throw sim::InputError("--why: unknown field '" + k +
                            "' (expected nodes, tp, pp, dp, zero, shard, mbs, gbs, "
                            "schedule, v, recompute, precision, attention, fp8, cp, ep, etp, sp, offload-optimizer, "
                            "offload-activations)");
  }
  space.complete_config(cfg);
  if (!dp_given && cfg.tp > 0 && cfg.pp > 0 && cfg.cp > 0)
    cfg.dp = std::max(1, cluster.devices() / (cfg.tp * cfg.cp * cfg.pp));
  if (cfg.pp > 0 && m.num_layers % cfg.pp) cfg.partition = {};  // validate_config explains
  return {cluster, cfg};
}

}  // namespace shardplan::planner
