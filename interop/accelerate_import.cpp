// ParallelConfig from a Hugging Face Accelerate config (YAML, as `accelerate config` writes it or
// by hand). Names and line citations: accelerate_flags.hpp (huggingface/accelerate 16cb6eb8,
// 2026-07-24). What is read follows what `accelerate launch` does with the file:
//   - fsdp_config keys with or without the fsdp_ prefix (launch.py:1264-1265);
//   - booleans as Accelerate's str_to_bool reads the launch flags (y/yes/t/true/on/1, n/no/f/
//     false/off/0; utils/environment.py:59-71 at 1afc3d8c), YAML booleans too;
//   - FSDP1 runs fsdp_sharding_strategy (default FULL_SHARD), whatever fsdp_reshard_after_forward
//     says (utils/launch.py:313, dataclasses.py:1836-1845, accelerator.py:1940); FSDP2 runs the
//     bool fsdp_reshard_after_forward (default true) and parallelism_config's sizes.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "accelerate.hpp"
#include "accelerate_flags.hpp"
#include "config_import_detail.hpp"
#include "formats/shell_quote.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace af = accelerate_flags;

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

template <std::size_t N>
bool one_of(const std::string& s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

// A mapping's entries in file order, keys as written (or normalized by the caller).
struct Entry {
  std::string key;
  YAML::Node value;
};
using Entries = std::vector<Entry>;

// Reads one file: positions in messages, typed values, the warnings.
struct Reader {
  std::string source;
  std::vector<std::string>* warnings;

  [[nodiscard]] std::string at(const YAML::Node& node) const {
    if (!node.IsDefined()) return source;
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return source;
    return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  }
  // What the file has at `node`, for a one-line message (keys and values may hold newlines).
  static std::string shown(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "null";
    if (node.IsMap()) return "a mapping";
    if (node.IsSequence()) return "a list";
    std::string s = formats::comment_text(node.Scalar());
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return "'" + s + "'";
  }
  [[noreturn]] void fail(const YAML::Node& node, std::string_view path, const std::string& expected) const {
    throw sim::InputError(at(node) + ": field '" + formats::comment_text(path) + "': expected " + expected);
  }
  void warn(const YAML::Node& node, std::string_view path, const std::string& what) const {
    warnings->push_back(at(node) + ": '" + formats::comment_text(path) + "' " + what);
  }

  // A mapping (absent or null: empty); `rename` renames keys as launch.py does.
  Entries mapping(const YAML::Node& node, std::string_view path, std::string (*rename)(std::string) = nullptr) const {
    Entries out;
    if (!node.IsDefined() || node.IsNull()) return out;
    if (!node.IsMap()) fail(node, path, "a mapping, got " + shown(node));
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) fail(kv.first, path, "keys that are names, got " + shown(kv.first));
      std::string key = rename != nullptr ? rename(kv.first.Scalar()) : kv.first.Scalar();
      const bool dup = std::any_of(out.begin(), out.end(), [&](const Entry& e) { return e.key == key; });
      if (dup)
        fail(kv.first, std::string(path).empty() ? key : std::string(path) + "." + key, "one value, got it twice");
      out.push_back({key, kv.second});
    }
    return out;
  }
  static YAML::Node find(const Entries& e, std::string_view key) {
    for (const auto& x : e)
      if (x.key == key) return x.value;
    return YAML::Node(YAML::NodeType::Undefined);
  }
  static bool present(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

  std::optional<std::string> text(const YAML::Node& node, std::string_view path) const {
    if (!present(node)) return std::nullopt;
    if (!node.IsScalar()) fail(node, path, "a name, got " + shown(node));
    return node.Scalar();
  }
  std::optional<long long> integer(const YAML::Node& node, std::string_view path, long long min) const {
    const auto s = text(node, path);
    if (!s) return std::nullopt;
    long long v = 0;
    const char* end = s->data() + s->size();
    const auto r = std::from_chars(s->data() + (!s->empty() && s->front() == '+'), end, v);
    if (r.ec != std::errc() || r.ptr != end || v < min)
      fail(node, path, "an integer >= " + std::to_string(min) + ", got " + shown(node));
    return v;
  }
  std::optional<bool> boolean(const YAML::Node& node, std::string_view path) const {
    const auto s = text(node, path);
    if (!s) return std::nullopt;
    const std::string v = lower(*s);
    for (const char* t : {"y", "yes", "t", "true", "on", "1"})
      if (v == t) return true;
    for (const char* f : {"n", "no", "f", "false", "off", "0"})
      if (v == f) return false;
    fail(node, path, "true or false, got " + shown(node));
  }
};

std::string fsdp_key(std::string k) { return k.rfind("fsdp", 0) == 0 ? k : std::string(af::fsdp_prefix) + k; }
// fp8_config keys as launch.py:1266-1267 turns them into arguments, without the fp8_ prefix again
// (so "backend" and "fp8_backend" are one key; "fp8_format" keeps its name).
std::string fp8_key(std::string k) {
  if (k.rfind("fp8", 0) != 0) return k;
  return k.rfind("fp8_", 0) == 0 && k != af::fp8_format ? k.substr(4) : k;
}

void warn_unknown(const Reader& rd, const Entries& entries, std::string_view section,
                  std::initializer_list<std::string_view> known, const std::string& why) {
  for (const auto& e : entries)
    if (std::find(known.begin(), known.end(), e.key) == known.end())
      rd.warn(e.value, std::string(section).empty() ? e.key : std::string(section) + "." + e.key, why);
}

// Index in sharding_strategies of a name (any case) or a number 1..5 (dataclasses.py:1840-1845);
// FSDP1 takes no bool here (dataclasses.py:1873-1876).
std::optional<int> strategy_index(const Reader& rd, const YAML::Node& node, std::string_view path) {
  const auto s = rd.text(node, path);
  if (!s) return std::nullopt;
  if (s->size() == 1 && (*s)[0] >= '1' && (*s)[0] <= '5') return (*s)[0] - '1';
  std::string u = *s;
  for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (int i = 0; i < 5; ++i)
    if (u == af::sharding_strategies[i]) return i;
  rd.fail(node, path,
          "with fsdp_version 1 a sharding strategy: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD "
          "or HYBRID_SHARD_ZERO2 (or 1..5), got " +
              Reader::shown(node));
}

}  // namespace

namespace {

std::string path_in(std::string_view section, std::string_view key) {
  return std::string(section) + "." + std::string(key);
}

// FSDP1: the strategy accelerate launch actually runs (fsdp_sharding_strategy, default FULL_SHARD).
void read_fsdp1(const Reader& rd, const Entries& f, const ImportContext& ctx, long long machines,
                sim::ParallelConfig& cfg) {
  const YAML::Node ss = Reader::find(f, af::fsdp_sharding_strategy);
  const YAML::Node raf = Reader::find(f, af::fsdp_reshard_after_forward);
  const int idx = strategy_index(rd, ss, path_in(af::fsdp_config, af::fsdp_sharding_strategy)).value_or(0);
  const auto written = strategy_index(rd, raf, path_in(af::fsdp_config, af::fsdp_reshard_after_forward));
  const std::string runs(af::sharding_strategies[idx]);
  if (written && *written != idx)
    rd.warn(raf, path_in(af::fsdp_config, af::fsdp_reshard_after_forward),
            "is " + std::string(af::sharding_strategies[*written]) +
                ", but accelerate launch runs FSDP1 with "
                "fsdp_sharding_strategy (" +
                runs + (Reader::present(ss) ? "" : ", its default") +
                "), which takes precedence (utils/launch.py:313, accelerator.py:1940); using " + runs);
  cfg.dp = ctx.devices;
  cfg.zero_stage = (idx == 0 || idx == 3) ? 3 : (idx == 2 ? 0 : 2);
  if (idx < 3) return;
  // HYBRID_SHARD*: FSDP1 shards within a node and replicates across nodes.
  const long long per_node = ctx.devices_per_node > 0 ? ctx.devices_per_node : ctx.devices / machines;
  const YAML::Node where = Reader::present(ss) ? ss : raf;
  if (per_node >= ctx.devices)
    rd.warn(where, path_in(af::fsdp_config, af::fsdp_sharding_strategy),
            "is " + runs + " on one node: it shards over all " + std::to_string(ctx.devices) + " processes");
  else if (ctx.devices % per_node != 0)
    rd.fail(where, path_in(af::fsdp_config, af::fsdp_sharding_strategy),
            "a node size dividing the " + std::to_string(ctx.devices) + " processes for " + runs + ", got " +
                std::to_string(per_node) + " devices per node");
  else cfg.sharding_degree = static_cast<int>(per_node);
}

void read_cp_strategy(const Reader& rd, const Entries& pc, int cp, sim::ParallelConfig& cfg) {
  const YAML::Node node = Reader::find(pc, af::pc_cp_comm_strategy);
  const std::string path = path_in(af::parallelism_config, af::pc_cp_comm_strategy);
  const std::string v = lower(rd.text(node, path).value_or(std::string(af::cp_allgather)));
  if (v != af::cp_allgather && v != af::cp_alltoall)
    rd.fail(node, path, "allgather or alltoall, got " + Reader::shown(node));
  const YAML::Node backend = Reader::find(pc, af::pc_cp_backend);
  if (const auto b = rd.text(backend, path_in(af::parallelism_config, af::pc_cp_backend)); b && *b != "torch")
    rd.fail(backend, path_in(af::parallelism_config, af::pc_cp_backend), "torch, got " + Reader::shown(backend));
  cfg.cp_kind = sim::CpKind::ring;
  if (cp > 1 && v == af::cp_allgather)
    rd.warn(node, path,
            "is allgather (every rank gathers all K/V shards): modelled as ring attention (alltoall, "
            "K/V passed to the neighbour cp - 1 times)");
}

// FSDP2's parallelism_config: dp_replicate x dp_shard x tp x cp processes.
void read_parallelism(const Reader& rd, const YAML::Node& node, const Entries& pc, const ImportContext& ctx,
                      sim::ParallelConfig& cfg) {
  const auto size = [&](std::string_view key) {
    return rd.integer(Reader::find(pc, key), path_in(af::parallelism_config, key), 1).value_or(1);
  };
  const long long dpr = size(af::pc_dp_replicate), dps = size(af::pc_dp_shard), tp = size(af::pc_tp),
                  cp = size(af::pc_cp), sp = size(af::pc_sp);
  if (sp > 1)
    rd.fail(Reader::find(pc, af::pc_sp), path_in(af::parallelism_config, af::pc_sp),
            "1 with FSDP (sp_size is DeepSpeed's ALST/Ulysses sequence parallelism, distributed_type DEEPSPEED), got " +
                std::to_string(sp));
  const long long total = dpr * dps * tp * cp;
  if (total != ctx.devices)
    rd.fail(node, af::parallelism_config,
            "dp_replicate_size x dp_shard_size x tp_size x cp_size = the cluster's " + std::to_string(ctx.devices) +
                " devices (parallelism_config.py:372-377), got " + std::to_string(dpr) + " x " + std::to_string(dps) +
                " x " + std::to_string(tp) + " x " + std::to_string(cp) + " = " + std::to_string(total));
  if (dpr > 1 && dps == 1)
    rd.fail(Reader::find(pc, af::pc_dp_shard), path_in(af::parallelism_config, af::pc_dp_shard),
            "a size > 1 when parallelism_config_dp_replicate_size is > 1 (pure replication is distributed_type "
            "MULTI_GPU; parallelism_config.py:61-66, 337-341), got 1");
  cfg.tp = static_cast<int>(tp);
  cfg.cp = static_cast<int>(cp);
  cfg.dp = static_cast<int>(dpr * dps);
  cfg.sharding_degree = dpr > 1 ? static_cast<int>(dps) : 0;
  read_cp_strategy(rd, pc, cfg.cp, cfg);
  std::vector<std::string_view> known = {af::pc_dp_replicate,     af::pc_dp_shard,   af::pc_tp, af::pc_cp,
                                         af::pc_cp_comm_strategy, af::pc_cp_backend, af::pc_sp};
  known.insert(known.end(), std::begin(af::pc_sp_keys), std::end(af::pc_sp_keys));
  for (const auto& e : pc)
    if (std::find(known.begin(), known.end(), e.key) == known.end())
      rd.warn(e.value, path_in(af::parallelism_config, e.key),
              "is not a parallelism_config key accelerate launch reads (they keep the parallelism_config_ prefix); "
              "ignored");
}

void read_fsdp2(const Reader& rd, const Entries& f, const YAML::Node& pnode, const Entries& pc,
                const ImportContext& ctx, sim::ParallelConfig& cfg) {
  const YAML::Node raf = Reader::find(f, af::fsdp_reshard_after_forward);
  const std::string path = path_in(af::fsdp_config, af::fsdp_reshard_after_forward);
  if (const auto s = rd.text(raf, path)) {
    std::string u = *s;
    for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (one_of(u, af::sharding_strategies))
      rd.fail(raf, path,
              "true or false with fsdp_version 2 (FSDP2 takes a bool, dataclasses.py:1869-1872; "
              "`accelerate to-fsdp2` converts FSDP1 names), got " +
                  Reader::shown(raf));
  }
  const bool reshard = rd.boolean(raf, path).value_or(true);  // launch.py:540, default "true"
  const YAML::Node ss = Reader::find(f, af::fsdp_sharding_strategy);
  if (Reader::present(ss))
    rd.warn(ss, path_in(af::fsdp_config, af::fsdp_sharding_strategy),
            "is not read with fsdp_version 2 (FSDP2 reads fsdp_reshard_after_forward); ignored");
  cfg.zero_stage = reshard ? 3 : 2;
  cfg.dp = ctx.devices;
  if (!pc.empty()) read_parallelism(rd, pnode, pc, ctx, cfg);
}

// The fsdp_config settings both versions read: offload, checkpointing, wrapping, prefetch.
void read_fsdp_common(const Reader& rd, const Entries& f, const YAML::Node& fnode, int version,
                      sim::ParallelConfig& cfg) {
  const auto p = [](std::string_view k) { return path_in(af::fsdp_config, k); };
  const YAML::Node off = Reader::find(f, af::fsdp_offload_params);
  cfg.offload_optimizer = rd.boolean(off, p(af::fsdp_offload_params)).value_or(false);
  if (cfg.offload_optimizer)
    rd.warn(off, p(af::fsdp_offload_params),
            "offloads the parameters and gradients too and steps the optimizer on "
            "the CPU; modelled as optimizer offload");
  if (rd.boolean(Reader::find(f, af::fsdp_activation_checkpointing), p(af::fsdp_activation_checkpointing))
          .value_or(false))
    cfg.recompute = sim::Recompute::full;
  const YAML::Node wrap = Reader::find(f, af::fsdp_auto_wrap_policy);
  std::string w = rd.text(wrap, p(af::fsdp_auto_wrap_policy)).value_or(std::string(af::no_wrap));
  for (char& ch : w) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (w != af::transformer_based_wrap && w != af::size_based_wrap && w != af::no_wrap)
    rd.fail(wrap, p(af::fsdp_auto_wrap_policy),
            "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP, got " + Reader::shown(wrap));
  if (w == af::no_wrap && cfg.zero_stage >= 2)
    rd.warn(Reader::present(wrap) ? wrap : fnode, p(af::fsdp_auto_wrap_policy),
            std::string(Reader::present(wrap) ? "is NO_WRAP" : "is missing (NO_WRAP, dataclasses.py:1902)") +
                ": the whole model is one FSDP unit, gathered at once; modelled as one unit per decoder layer");
  if (w == af::size_based_wrap)
    rd.warn(wrap, p(af::fsdp_auto_wrap_policy),
            "is SIZE_BASED_WRAP: units by parameter count; modelled as one unit "
            "per decoder layer");
  const YAML::Node bp = Reader::find(f, af::fsdp_backward_prefetch);
  std::string b = rd.text(bp, p(af::fsdp_backward_prefetch)).value_or(std::string(af::no_prefetch));
  for (char& ch : b) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (b == "1" || b == "2") b = b == "1" ? std::string(af::backward_pre) : "BACKWARD_POST";  // dataclasses.py:1888-1893
  if (b != af::backward_pre && b != "BACKWARD_POST" && b != af::no_prefetch)
    rd.fail(bp, p(af::fsdp_backward_prefetch), "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH, got " + Reader::shown(bp));
  if (version == 1 && cfg.zero_stage == 3 && b == af::no_prefetch)
    rd.warn(Reader::present(bp) ? bp : fnode, p(af::fsdp_backward_prefetch),
            std::string(Reader::present(bp) ? "is NO_PREFETCH" : "is missing (no prefetch, dataclasses.py:1884-1886)") +
                ": FSDP1 gathers each layer only when its backward starts; modelled with the next layer prefetched");
  warn_unknown(rd, f, af::fsdp_config,
               {af::fsdp_version, af::fsdp_reshard_after_forward, af::fsdp_sharding_strategy, af::fsdp_offload_params,
                af::fsdp_auto_wrap_policy, af::fsdp_transformer_layer_cls_to_wrap, af::fsdp_min_num_params,
                af::fsdp_backward_prefetch, af::fsdp_forward_prefetch, af::fsdp_state_dict_type,
                af::fsdp_use_orig_params, af::fsdp_cpu_ram_efficient_loading, af::fsdp_sync_module_states,
                af::fsdp_activation_checkpointing, af::fsdp_ignored_modules},
               "is not an fsdp_config setting of accelerate launch; ignored");
}

// distributed_type FSDP; returns the FSDP version.
int read_fsdp(const Reader& rd, const Entries& root, const ImportContext& ctx, long long machines,
              sim::ParallelConfig& cfg) {
  const YAML::Node fnode = Reader::find(root, af::fsdp_config);
  const Entries f = rd.mapping(fnode, af::fsdp_config, fsdp_key);
  const YAML::Node vnode = Reader::find(f, af::fsdp_version);
  const long long version = rd.integer(vnode, path_in(af::fsdp_config, af::fsdp_version), 1).value_or(1);
  if (version != 1 && version != 2)
    rd.fail(vnode, path_in(af::fsdp_config, af::fsdp_version), "1 or 2, got " + Reader::shown(vnode));
  const YAML::Node pnode = Reader::find(root, af::parallelism_config);
  const Entries pc = rd.mapping(pnode, af::parallelism_config);
  if (version == 1 && !pc.empty())
    rd.fail(pnode, af::parallelism_config,
            "no parallelism_config with fsdp_version 1 (the Accelerator takes it only with FSDP2, "
            "parallelism_config.py:379-385), got a mapping");
  if (version == 1) read_fsdp1(rd, f, ctx, machines, cfg);
  else read_fsdp2(rd, f, pnode, pc, ctx, cfg);
  read_fsdp_common(rd, f, fnode, static_cast<int>(version), cfg);
  return static_cast<int>(version);
}

}  // namespace

namespace {

// mixed_precision fp8 with its fp8_config (keys renamed by fp8_key).
void read_fp8(const Reader& rd, const Entries& fp8, const YAML::Node& mp, int fsdp_version, sim::ParallelConfig& cfg) {
  const auto p = [](std::string_view k) { return path_in(af::fp8_config, k); };
  const YAML::Node bnode = Reader::find(fp8, af::fp8_backend);
  std::string backend = rd.text(bnode, p(af::fp8_backend)).value_or("");
  for (char& ch : backend) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  bool all_gather = rd.boolean(Reader::find(fp8, af::fp8_enable_fsdp_float8_all_gather),
                               p(af::fp8_enable_fsdp_float8_all_gather))
                        .value_or(true);  // AORecipeKwargs default
  if (backend.empty()) {
    rd.warn(mp, af::mixed_precision,
            "is fp8 without fp8_config.backend: Accelerate takes torchao when it is "
            "installed (accelerator.py:487-495); modelled as torchao tensorwise scaling");
    backend = af::fp8_backend_ao;
  }
  if (backend == af::fp8_backend_te) {
    const YAML::Node mx = Reader::find(fp8, af::fp8_use_mxfp8_block_scaling);
    if (rd.boolean(mx, p(af::fp8_use_mxfp8_block_scaling)).value_or(false)) {
      cfg.fp8 = sim::Fp8Recipe::blockwise;
      rd.warn(mx, p(af::fp8_use_mxfp8_block_scaling),
              "is MXFP8 (one scale per 1x32 block): modelled as blockwise "
              "scaling (1x128 / 128x128 blocks)");
    } else {
      cfg.fp8 = sim::Fp8Recipe::delayed;  // TERecipeKwargs: DelayedScaling (amax history)
    }
    all_gather = false;
  } else if (backend == af::fp8_backend_ao) {
    cfg.fp8 = sim::Fp8Recipe::tensorwise;  // torchao Float8LinearConfig's default recipe
  } else if (backend == af::fp8_backend_msamp) {
    cfg.fp8 = sim::Fp8Recipe::delayed;
    rd.warn(bnode, p(af::fp8_backend),
            "is MSAMP (MS-AMP keeps FP8 weights and optimizer states): modelled as FP8 "
            "GEMMs with delayed scaling");
    all_gather = false;
  } else {
    rd.fail(bnode, p(af::fp8_backend), "TE, AO or MSAMP, got " + Reader::shown(bnode));
  }
  // torchao gathers FP8 weights under FSDP2 only (AORecipeKwargs, dataclasses.py:313-350).
  cfg.fp8_param_gather = all_gather && fsdp_version == 2 && cfg.zero_stage >= 1;
  warn_unknown(rd, fp8, af::fp8_config,
               {af::fp8_backend, af::fp8_format, af::fp8_amax_history_len, af::fp8_amax_compute_algo,
                af::fp8_use_mxfp8_block_scaling, af::fp8_enable_fsdp_float8_all_gather, "margin", "interval",
                "override_linear_precision", "use_autocast_during_eval", "pad_inner_dim", "opt_level",
                "amax_history_length", "amax_compute_algorithm", "optimization_level"},
               "is not an fp8_config setting of accelerate launch; ignored");
}

// mixed_precision: no | fp16 | bf16 | fp8 (absent: the context's precision, else "no" as
// accelerate launch defaults). An unquoted `no` is a YAML 1.1 false: the same.
void read_precision(const Reader& rd, const Entries& root, const ImportContext& ctx, int fsdp_version,
                    sim::ParallelConfig& cfg) {
  const YAML::Node mp = Reader::find(root, af::mixed_precision);
  const YAML::Node fnode = Reader::find(root, af::fp8_config);
  const Entries fp8 = rd.mapping(fnode, af::fp8_config, fp8_key);
  const std::string v = lower(rd.text(mp, af::mixed_precision).value_or(""));
  if (v.empty()) cfg.precision = ctx.precision.value_or(sim::Precision::fp32);
  else if (v == af::precision_no || v == "false" || v == "off") cfg.precision = sim::Precision::fp32;
  else if (v == af::precision_fp16) cfg.precision = sim::Precision::fp16;
  else if (v == af::precision_bf16 || v == af::precision_fp8)
    cfg.precision = sim::Precision::bf16;  // fp8 runs the rest in bf16 (dataclasses.py:2094-2099)
  else rd.fail(mp, af::mixed_precision, "no, fp16, bf16 or fp8, got " + Reader::shown(mp));
  if (v == af::precision_fp8) read_fp8(rd, fp8, mp, fsdp_version, cfg);
  else if (!fp8.empty()) rd.warn(fnode, af::fp8_config, "is not read: mixed_precision is not fp8; ignored");
}

// The micro-batch size from the context (Accelerate configs have none) and accumulation 1.
void fill_batch(const Reader& rd, const ImportContext& ctx, sim::ParallelConfig& cfg) {
  cfg.micro_batch_size = ctx.micro_batch_size > 0 ? ctx.micro_batch_size : 1;
  if (ctx.micro_batch_size == 0)
    rd.warnings->push_back(rd.source +
                           ": Accelerate configs have no micro-batch size (the script's DataLoader sets "
                           "it): using 1; give it to the import");
  const int step = cfg.micro_batch_size * cfg.dp;
  if (ctx.global_batch_size > 0) {
    if (ctx.global_batch_size % step != 0)
      throw sim::InputError(rd.source + ": the global batch size given to the import (" +
                            std::to_string(ctx.global_batch_size) +
                            ") is not a multiple of micro-batch x dp = " + std::to_string(step));
    cfg.global_batch_size = ctx.global_batch_size;
    return;
  }
  cfg.global_batch_size = step;
  rd.warnings->push_back(rd.source +
                         ": Accelerate configs have no gradient accumulation "
                         "(Accelerator(gradient_accumulation_steps=...) in the script): assuming 1, "
                         "global batch " +
                         std::to_string(cfg.global_batch_size) + " (give the global batch size to the import)");
}

// distributed_type: what runs, into cfg; returns the FSDP version (0 when not FSDP).
int read_type(const Reader& rd, const YAML::Node& doc, const Entries& root, const ImportContext& ctx,
              long long machines, sim::ParallelConfig& cfg) {
  const YAML::Node t = Reader::find(root, af::distributed_type);
  if (!Reader::present(t))
    rd.fail(doc, af::distributed_type,
            "FSDP (or MULTI_GPU, NO), it is missing (every Accelerate config has one, "
            "config_args.py:109-110)");
  std::string type = *rd.text(t, af::distributed_type);
  for (char& ch : type) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (type == af::type_fsdp) return read_fsdp(rd, root, ctx, machines, cfg);
  if (type == af::type_deepspeed)
    rd.fail(t, af::distributed_type,
            "FSDP, got DEEPSPEED: this config runs DeepSpeed, so import its DeepSpeed "
            "config instead (the ds_config JSON that deepspeed_config.deepspeed_config_file "
            "names)");
  if (type == af::type_megatron)
    rd.fail(t, af::distributed_type, "FSDP, got MEGATRON_LM: import the Megatron-LM arguments instead");
  const bool ddp = one_of(type, af::multi_device_types);
  if (!ddp && type != af::type_no)
    rd.fail(t, af::distributed_type, "FSDP, a MULTI_* type (DDP), NO or DEEPSPEED, got " + Reader::shown(t));
  if (type == af::type_no && ctx.devices != 1)
    rd.fail(t, af::distributed_type,
            "FSDP or MULTI_GPU for the cluster's " + std::to_string(ctx.devices) + " devices, got NO (one process)");
  const YAML::Node pnode = Reader::find(root, af::parallelism_config);
  if (!rd.mapping(pnode, af::parallelism_config).empty())
    rd.fail(pnode, af::parallelism_config,
            "no parallelism_config with distributed_type " + type +
                " (shardplan reads it with FSDP, fsdp_version 2), got a mapping");
  const YAML::Node fnode = Reader::find(root, af::fsdp_config);
  if (!rd.mapping(fnode, af::fsdp_config).empty())
    rd.warn(fnode, af::fsdp_config, "is not read: distributed_type is " + type + "; ignored");
  cfg.dp = ctx.devices;
  cfg.zero_stage = 0;  // plain DDP: every rank holds everything
  return 0;
}

void warn_unknown_top_level(const Reader& rd, const Entries& root) {
  const std::string_view read[] = {af::compute_environment, af::distributed_type,  af::num_processes,
                                   af::num_machines,        af::mixed_precision,   af::fsdp_config,
                                   af::parallelism_config,  af::fp8_config,        af::use_cpu,
                                   af::deepspeed_config,    af::megatron_lm_config};
  for (const auto& e : root)
    if (!one_of(e.key, read) && !one_of(e.key, af::silent_top_level))
      rd.warn(e.value, e.key,
              "is not an Accelerate config key (accelerate launch refuses unknown top-level keys, "
              "config_args.py:154-159); ignored");
}

}  // namespace

ImportResult import_accelerate(std::string_view yaml, const ImportContext& ctx, const std::string& source) {
  import_detail::check_context(ctx, source);
  ImportResult r;
  const Reader rd{source, &r.warnings};
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    if (!doc.IsMap())
      throw sim::InputError(source +
                            ": expected a YAML mapping (an Accelerate config, as `accelerate config` "
                            "writes it), got " +
                            Reader::shown(doc));
    const Entries root = rd.mapping(doc, "");
    auto& cfg = r.config;
    cfg.seq_len = ctx.seq_len;
    const YAML::Node env = Reader::find(root, af::compute_environment);
    const std::string e = rd.text(env, af::compute_environment).value_or(std::string(af::local_machine));
    if (e != af::local_machine)
      rd.fail(env, af::compute_environment,
              std::string("LOCAL_MACHINE, got ") + Reader::shown(env) +
                  (e == af::sagemaker ? " (a SageMaker launch: import its distribution settings instead)" : ""));
    const YAML::Node np = Reader::find(root, af::num_processes);
    const auto procs = rd.integer(np, af::num_processes, -1);
    if (procs && *procs != -1 && *procs != ctx.devices)
      rd.fail(np, af::num_processes,
              "the cluster's " + std::to_string(ctx.devices) +
                  " devices (num_processes is the total over all machines), got " + std::to_string(*procs));
    const YAML::Node nm = Reader::find(root, af::num_machines);
    const long long machines = rd.integer(nm, af::num_machines, 1).value_or(1);
    if (ctx.devices % machines != 0)
      rd.fail(nm, af::num_machines,
              "a divisor of the " + std::to_string(ctx.devices) + " processes, got " + std::to_string(machines));
    if (ctx.devices_per_node > 0 && ctx.devices / machines != ctx.devices_per_node)
      rd.warn(nm, af::num_machines,
              "gives " + std::to_string(ctx.devices / machines) + " processes per machine, but the cluster has " +
                  std::to_string(ctx.devices_per_node) + " devices per node");
    const int version = read_type(rd, doc, root, ctx, machines, cfg);
    read_precision(rd, root, ctx, version, cfg);
    if (ctx.tp > 0 && ctx.tp != cfg.tp)
      throw sim::InputError(
          source + ": the tensor-parallel degree given to the import (" + std::to_string(ctx.tp) +
          ") is not the file's (parallelism_config.parallelism_config_tp_size: " + std::to_string(cfg.tp) + ")");
    if (ctx.pp > 1)
      throw sim::InputError(source + ": the import was given pp " + std::to_string(ctx.pp) +
                            ", but Accelerate with FSDP has no pipeline parallelism");
    fill_batch(rd, ctx, cfg);
    if (rd.boolean(Reader::find(root, af::use_cpu), af::use_cpu).value_or(false))
      rd.warn(Reader::find(root, af::use_cpu), af::use_cpu,
              "is true (training on CPUs); the cluster comes from the import settings");
    for (const std::string_view k : {af::deepspeed_config, af::megatron_lm_config})
      if (!rd.mapping(Reader::find(root, k), k).empty())
        rd.warn(Reader::find(root, k), k, "is not read with distributed_type FSDP or DDP; ignored");
    warn_unknown_top_level(rd, root);
    import_detail::warn_layout(ctx, cfg, r.warnings);
  } catch (const YAML::Exception& e) {
    const std::string at =
        e.mark.is_null() ? source
                         : source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    throw sim::InputError(at + ": not valid YAML: " + e.msg);
  }
  return r;
}

}  // namespace shardplan::interop
