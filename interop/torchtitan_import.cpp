// ParallelConfig from a torchtitan v0.2.2 job config (TOML; keys in torchtitan_flags.hpp, checked
// at torchtitan 73a0e697). Absent keys take torchtitan's defaults (torchtitan/config/job_config.py),
// which are not always shardplan's: activation checkpointing defaults to selective every 2nd block,
// data_parallel_shard_degree to -1 (the ranks left after replicate x cp x tp x pp, as
// parallel_dims.py:47-55 computes it), local_batch_size to 8.
//
// What torchtitan runs, read back as the export writes it (torchtitan_export.cpp):
//   FSDP (shard > 1 or cp > 1): ZeRO-3 when it reshards after forward ("always", or "default"
//   without PP), ZeRO-2 otherwise; the sharding degree is data_parallel_shard_degree (HSDP
//   replicates over data_parallel_replicate_degree). No FSDP: ZeRO-0 (DDP).
//   Precision: bf16 with fp32 master weights under FSDP, torch.autocast (MixedPrecision autocast)
//   for DDP / one device, fp32 with TP or PP and no FSDP (torchtitan disables mixed precision there).
// The model is not read (the caller gives it); [model] name/flavor only tell the layer count
// where torchtitan derives the pipeline split from it.
#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>

#include "config_import_detail.hpp"
#include "simulator/errors.hpp"
#include "torchtitan.hpp"
#include "torchtitan_flags.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace tf = torchtitan_flags;

namespace {

using Warnings = std::vector<std::string>;

constexpr long long kMaxInt = 2147483647;

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

std::string value_text(const toml::node& n) {
  std::ostringstream s;
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  s << toml::toml_formatter(n, toml::format_flags::none);
  return s.str();
}

// One table of the job config (absent = empty) with errors naming the file, line and key.
class Section {
 public:
  Section(const toml::table* table, std::string name, const std::string& source)
      : table_(table), name_(std::move(name)), source_(&source) {}

  [[nodiscard]] const toml::node* get(std::string_view key) const { return table_ ? table_->get(key) : nullptr; }
  [[nodiscard]] std::string path(std::string_view key) const {
    return name_.empty() ? std::string(key) : name_ + "." + std::string(key);
  }
  // "<source>: 'section.key'", the start of a warning about the key.
  [[nodiscard]] std::string where(std::string_view key) const { return *source_ + ": '" + path(key) + "'"; }

  [[noreturn]] void fail(std::string_view key, const std::string& expected) const {
    const toml::node* n = get(key);
    const std::string line = n ? ":" + std::to_string(n->source().begin.line) : "";
    throw sim::InputError(*source_ + line + ": field '" + path(key) + "': expected " + expected);
  }
  std::optional<long long> integer(std::string_view key, long long min) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    if (!n->is_integer() || n->as_integer()->get() < min || n->as_integer()->get() > kMaxInt)
      fail(key, "an integer >= " + std::to_string(min) + " (and < 2^31), got " + value_text(*n));
    return n->as_integer()->get();
  }
  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) fail(key, "true or false, got " + value_text(*n));
    return n->as_boolean()->get();
  }
  std::optional<std::string> string(std::string_view key) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) fail(key, "a string, got " + value_text(*n));
    return n->as_string()->get();
  }
  std::vector<std::string> strings(std::string_view key) const {
    std::vector<std::string> out;
    const toml::node* n = get(key);
    if (!n) return out;
    if (!n->is_array()) fail(key, "an array of strings, got " + value_text(*n));
    for (const auto& e : *n->as_array()) {
      if (!e.is_string()) fail(key, "an array of strings, got an element " + value_text(e));
      out.push_back(e.as_string()->get());
    }
    return out;
  }
  [[nodiscard]] Section child(std::string_view key) const {
    const toml::node* n = get(key);
    if (n && !n->is_table()) fail(key, "a table ([" + path(key) + "]), got " + value_text(*n));
    return {n ? n->as_table() : nullptr, path(key), *source_};
  }
  [[nodiscard]] const toml::table* table() const { return table_; }

  // A warning for each key neither read nor known to be irrelevant (torchtitan itself refuses
  // keys that are not fields of the section's dataclass).
  template <std::size_t R, std::size_t S>
  void warn_unknown(const std::array<std::string_view, R>& read, const std::array<std::string_view, S>& silent,
                    Warnings& w) const {
    if (!table_) return;
    for (const auto& [k, v] : *table_) {
      (void)v;
      if (!listed(read, k.str()) && !listed(silent, k.str()))
        w.push_back(*source_ + ": '" + path(k.str()) + "' is not a torchtitan " + std::string(tf::version) +
                    " key of [" + name_ + "] (torchtitan refuses it); ignored");
    }
  }

 private:
  const toml::table* table_;
  std::string name_;
  const std::string* source_;
};

// The data-parallel layout torchtitan builds (ParallelDims).
struct Dims {
  int replicate = 1, shard = 1;
  [[nodiscard]] bool fsdp(int cp) const { return shard > 1 || cp > 1; }
};

// An integer that is -1 ("the rest" / "derived") or >= 1.
std::optional<long long> minus_one_or_positive(const Section& s, std::string_view key) {
  const toml::node* n = s.get(key);
  if (n && n->is_integer() && n->as_integer()->get() == -1) return -1;
  if (n && (!n->is_integer() || n->as_integer()->get() < 1))
    s.fail(key, "-1 or an integer >= 1, got " + value_text(*n));
  return s.integer(key, 1);
}

// A parallel degree (at most the cluster's devices); `from_ctx` > 0 must agree with the file's.
int degree(const Section& s, std::string_view key, int from_ctx, const char* what, int devices) {
  const auto v = s.integer(key, 1);
  if (v && *v > devices) s.fail(key, "at most the " + std::to_string(devices) + " devices, got " + std::to_string(*v));
  if (v && from_ctx > 0 && *v != from_ctx)
    s.fail(key, "the same " + std::string(what) + " as given to the import (" + std::to_string(from_ctx) + "), got " +
                    std::to_string(*v));
  return static_cast<int>(v.value_or(from_ctx > 0 ? from_ctx : 1));
}

// Degrees, dp and the ZeRO stage torchtitan's FSDP amounts to.
Dims read_parallel(const Section& par, const ImportContext& ctx, sim::ParallelConfig& c) {
  Dims d;
  c.tp = degree(par, tf::tp, ctx.tp, "tensor-parallel degree", ctx.devices);
  c.pp = degree(par, tf::pp, ctx.pp, "pipeline-parallel degree", ctx.devices);
  c.cp = degree(par, tf::cp, 0, "", ctx.devices);
  d.replicate = degree(par, tf::dp_replicate, 0, "", ctx.devices);
  const long long shard = minus_one_or_positive(par, tf::dp_shard).value_or(-1);
  long long rest = 1;
  for (const int degree_of : {d.replicate, c.cp, c.tp, c.pp}) {  // each <= devices: no overflow
    rest *= degree_of;
    if (rest > ctx.devices)
      par.fail(tf::tp, "data_parallel_replicate_degree x cp x tp x pp to divide the " + std::to_string(ctx.devices) +
                           " devices, got a product of more than that");
  }
  if (shard == -1 && ctx.devices % rest != 0)
    par.fail(tf::dp_shard, "-1 to take the ranks left by replicate x cp x tp x pp = " + std::to_string(rest) +
                               ", which does not divide the " + std::to_string(ctx.devices) + " devices");
  d.shard = static_cast<int>(shard == -1 ? ctx.devices / rest : shard);
  if (rest * d.shard != ctx.devices)
    par.fail(tf::dp_shard, "data_parallel_replicate_degree x data_parallel_shard_degree x cp x tp x pp (" +
                               std::to_string(rest) + " x " + std::to_string(d.shard) + ") = the " +
                               std::to_string(ctx.devices) + " devices");
  c.dp = d.replicate * d.shard;
  c.sequence_parallel = c.tp > 1;  // torchtitan's TP is always sequence parallel
  c.cp_kind = sim::CpKind::ring;
  c.rank_order = "tp-dp-pp";
  if (d.fsdp(c.cp)) {
    const std::string policy = par.string(tf::fsdp_reshard).value_or(std::string(tf::reshard_default));
    if (policy != tf::reshard_default && policy != tf::reshard_always && policy != tf::reshard_never)
      par.fail(tf::fsdp_reshard, "\"default\", \"always\" or \"never\", got \"" + policy + "\"");
    const bool reshard = policy == tf::reshard_always || (policy == tf::reshard_default && c.pp == 1);
    c.zero_stage = reshard ? 3 : 2;
    c.sharding_degree = d.replicate > 1 ? d.shard : 0;
  }
  return d;
}

void read_experts(const Section& par, const Dims& d, sim::ParallelConfig& c) {
  c.ep = static_cast<int>(par.integer(tf::ep, 1).value_or(1));
  const int etp = static_cast<int>(par.integer(tf::etp, 1).value_or(1));
  if (c.ep == 1) return;  // "No effect ... when ep = 1" (JC:466): experts follow tp
  if (etp != 1 && etp != c.tp)
    par.fail(tf::etp, "1 or tensor_parallel_degree (" + std::to_string(c.tp) + "), what torchtitan supports, got " +
                          std::to_string(etp));
  const long long pool = static_cast<long long>(d.shard) * c.cp * c.tp;
  if (pool % (static_cast<long long>(c.ep) * etp) != 0)
    par.fail(tf::ep, "ep x etp (" + std::to_string(c.ep) + " x " + std::to_string(etp) +
                         ") to divide data_parallel_shard_degree x cp x tp = " + std::to_string(pool));
  c.etp = etp;
}

void read_batch(const Section& tr, const Section& par, const ImportContext& ctx, sim::ParallelConfig& c) {
  const long long local = tr.integer(tf::local_batch_size, 1).value_or(tf::default_local_batch_size);
  long long global = minus_one_or_positive(tr, tf::global_batch_size).value_or(-1);
  if (global == -1) global = local * c.dp;  // JC:256: one accumulation step
  if (global % (local * c.dp) != 0)
    tr.fail(tf::global_batch_size, "a multiple of local_batch_size x data-parallel degree = " + std::to_string(local) +
                                       " x " + std::to_string(c.dp) + ", got " + std::to_string(global));
  long long micro = local;
  if (c.pp > 1) {
    micro = par.integer(tf::pp_microbatch_size, 1).value_or(1);
    if (local % micro != 0)
      par.fail(tf::pp_microbatch_size,
               "a divisor of training.local_batch_size (" + std::to_string(local) + "), got " + std::to_string(micro));
  }
  if (ctx.micro_batch_size > 0 && micro != ctx.micro_batch_size)
    (c.pp > 1 ? par : tr)
        .fail(c.pp > 1 ? tf::pp_microbatch_size : tf::local_batch_size, "the micro-batch size given to the import (" +
                                                                            std::to_string(ctx.micro_batch_size) +
                                                                            "), got " + std::to_string(micro));
  c.micro_batch_size = static_cast<int>(micro);
  c.global_batch_size = static_cast<int>(global);
  c.seq_len = static_cast<int>(tr.integer(tf::seq_len, 1).value_or(ctx.seq_len));
  const long long divisor = 2LL * c.tp * c.cp;
  if (c.seq_len % divisor != 0)
    tr.fail(tf::seq_len, "a multiple of tp x 2 x cp = " + std::to_string(divisor) +
                             " (torchtitan's seq_len_divisor), got " + std::to_string(c.seq_len));
}

std::string dtype_of(const Section& tr, std::string_view key, std::string_view fallback) {
  const std::string v = tr.string(key).value_or(std::string(fallback));
  if (v != tf::bfloat16 && v != tf::float32) tr.fail(key, "\"bfloat16\" or \"float32\", got \"" + v + "\"");
  return v;
}

void read_precision(const Section& tr, const Dims& d, sim::ParallelConfig& c, Warnings& w) {
  const std::string dtype = dtype_of(tr, tf::dtype, tf::float32);
  const std::string param = dtype_of(tr, tf::mixed_precision_param, tf::bfloat16);
  if (tr.string(tf::mixed_precision_reduce).value_or(std::string(tf::float32)) != tf::float32)
    tr.fail(tf::mixed_precision_reduce, "\"float32\" (the only reduce dtype torchtitan takes)");
  if (dtype == tf::bfloat16) {
    c.precision = sim::Precision::bf16;
    c.mixed_precision = sim::MixedPrecision::master_weights;
    w.push_back(tr.where(tf::dtype) +
                " = \"bfloat16\" is pure bf16 training (no fp32 master weights): modelled as "
                "bf16 with an fp32 master, which overstates its optimizer memory");
  } else if (param == tf::float32) {
    c.precision = sim::Precision::fp32;
  } else if (d.fsdp(c.cp)) {
    c.precision = sim::Precision::bf16;  // FSDP2 MixedPrecisionPolicy: bf16 gathers of fp32 shards
    c.mixed_precision = sim::MixedPrecision::master_weights;
  } else if (c.tp > 1 || c.pp > 1) {
    c.precision = sim::Precision::fp32;
    w.push_back(tr.where(tf::mixed_precision_param) +
                " = \"bfloat16\" has no effect with TP or PP and no FSDP "
                "(torchtitan disables mixed precision there): modelled as fp32");
  } else {
    c.precision = sim::Precision::bf16;  // DDP / one device: torch.autocast over fp32 weights
    c.mixed_precision = sim::MixedPrecision::autocast;
  }
}

void read_offload(const Section& tr, const Dims& d, sim::ParallelConfig& c, Warnings& w) {
  if (!tr.boolean(tf::enable_cpu_offload).value_or(false)) return;
  if (!d.fsdp(c.cp)) {
    w.push_back(tr.where(tf::enable_cpu_offload) +
                " has no effect without FSDP (FSDP2's "
                "CPUOffloadPolicy); ignored");
    return;
  }
  c.offload_optimizer = true;
  w.push_back(tr.where(tf::enable_cpu_offload) +
              " also keeps parameters and gradients on the "
              "host (FSDP2 CPUOffloadPolicy): modelled as optimizer offload");
}

// torchtitan's generate_llm_fqn_per_model_part (pipeline_parallel.py:236-344), counting the
// transformer blocks of each stage.
std::vector<int> generated_split(int stages, int layers, int in, int out, const Section& par) {
  if (stages == 1) return {layers};
  const int effective = layers + in + out;
  const int per = effective / stages, extra = effective % stages;
  if (per == 0 || in > per || out > per)
    par.fail(tf::pp_layers_per_stage, "a split torchtitan can make: " + std::to_string(stages) + " stages of " +
                                          std::to_string(layers) + " layers (+ first/last stage less layers " +
                                          std::to_string(in) + ", " + std::to_string(out) + ") leaves empty stages");
  std::vector<int> counts;
  int left = layers;
  for (int s = 0; s < stages; ++s) {
    int n = per + (s < extra ? 1 : 0) - (s == 0 ? in : 0) - (s == stages - 1 ? out : 0);
    n = std::clamp(n, 0, left);
    counts.push_back(n);
    left -= n;
  }
  return counts;
}

// Transformer blocks of each part of module_fqns_per_model_part. A part without blocks is the
// first holding only tok_embeddings or the last holding only norm and output (pipeline_module_split
// keeps what each part lists, pipeline_parallel.py:389-431); the simulator models no other.
std::vector<int> listed_split(const Section& par) {
  const toml::node* n = par.get(tf::pp_fqns);
  if (!n->is_array()) par.fail(tf::pp_fqns, "an array of arrays of module names, got " + value_text(*n));
  const auto& parts = *n->as_array();
  std::vector<int> counts;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].is_array())
      par.fail(tf::pp_fqns, "an array of arrays of module names, got an element " + value_text(parts[i]));
    int blocks = 0;
    bool embeddings = false, output = false;
    for (const auto& fqn : *parts[i].as_array()) {
      if (!fqn.is_string()) par.fail(tf::pp_fqns, "module names (strings), got " + value_text(fqn));
      const std::string& name = fqn.as_string()->get();
      if (name.rfind(tf::fqn_layers, 0) == 0) ++blocks;
      embeddings |= name == tf::fqn_embeddings;
      output |= name == tf::fqn_output;
    }
    const bool edge = (i == 0 && embeddings) || (i + 1 == parts.size() && output);
    if (blocks == 0 && !edge)
      par.fail(tf::pp_fqns,
               "a transformer block (layers.N) in every part but a first holding only tok_embeddings and a last "
               "holding only norm and output; part " +
                   std::to_string(i) + " has none");
    counts.push_back(blocks);
  }
  return counts;
}

sim::PipelineSchedule schedule_of(const Section& par) {
  std::string name = par.string(tf::pp_schedule).value_or(std::string(tf::schedule_1f1b));
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const auto is = [&](std::string_view v) {
    std::string l(v);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return lower == l;
  };
  if (is(tf::schedule_1f1b)) return sim::PipelineSchedule::one_f_one_b;
  if (is(tf::schedule_interleaved)) return sim::PipelineSchedule::interleaved;
  if (is(tf::schedule_gpipe)) return sim::PipelineSchedule::gpipe;
  if (is(tf::schedule_zbv)) return sim::PipelineSchedule::zbv;
  if (is(tf::schedule_dualpipev)) return sim::PipelineSchedule::dualpipev;
  par.fail(tf::pp_schedule,
           "1F1B, Interleaved1F1B, GPipe, ZBVZeroBubble or DualPipeV (the schedules shardplan models), got \"" + name +
               "\"");
}

// The per-stage block counts torchtitan uses; empty when they depend on an unknown layer count.
std::vector<int> pipeline_split(const Section& par, const tf::Flavor* flavor, bool single, int pp, Warnings& w) {
  if (par.get(tf::pp_fqns)) return listed_split(par);
  const int in = static_cast<int>(par.integer(tf::pp_first_less, 0).value_or(1));
  const int out = static_cast<int>(par.integer(tf::pp_last_less, 0).value_or(1));
  const auto per_stage = par.integer(tf::pp_layers_per_stage, 1);
  if (!flavor) {
    w.push_back(par.where(tf::pp) +
                ": the layer split depends on the model's layer count, and [model] names no "
                "known flavor: assumed even, " +
                std::to_string(single ? 1 : 2) + " stage(s) per rank");
    return {};
  }
  int stages = pp * (single ? 1 : 2);  // pipeline_parallel.py:110-115
  if (per_stage) {
    stages = static_cast<int>((flavor->n_layers + in + out + *per_stage - 1) / *per_stage);
    if (stages % pp != 0 || (single && stages != pp) || (!single && stages < 2 * pp))
      par.fail(tf::pp_layers_per_stage, "a count giving " + std::string(single ? "1" : ">= 2") +
                                            " stage(s) on each of the " + std::to_string(pp) + " ranks (" +
                                            std::to_string(flavor->n_layers) + " layers), got " +
                                            std::to_string(*per_stage));
  }
  return generated_split(stages, flavor->n_layers, in, out, par);
}

void read_pipeline(const Section& par, const tf::Flavor* flavor, sim::ParallelConfig& c, Warnings& w) {
  if (c.pp == 1) return;
  c.schedule = schedule_of(par);
  if (!par.string(tf::pp_schedule_csv).value_or("").empty())
    w.push_back(par.where(tf::pp_schedule_csv) +
                " (a custom schedule) is not modelled; the "
                "named schedule is used");
  const bool single = c.schedule != sim::PipelineSchedule::interleaved && !sim::v_shaped(c.schedule);
  const std::vector<int> split = pipeline_split(par, flavor, single, c.pp, w);
  const int stages = split.empty() ? c.pp * (single ? 1 : 2) : static_cast<int>(split.size());
  if (stages % c.pp != 0 || (single && stages != c.pp))
    par.fail(tf::pp_fqns, std::string(single ? "one part per pipeline rank" : "a multiple of the pipeline degree") +
                              " (" + std::to_string(c.pp) + " ranks), got " + std::to_string(stages) + " parts");
  c.virtual_stages = stages / c.pp;
  if (sim::v_shaped(c.schedule) && c.virtual_stages != 2)
    par.fail(tf::pp_schedule, std::string(c.schedule == sim::PipelineSchedule::zbv ? "ZBVZeroBubble" : "DualPipeV") +
                                  " with two stages per rank (a V), got " + std::to_string(c.virtual_stages));
  if (c.schedule == sim::PipelineSchedule::interleaved && c.virtual_stages < 2) {
    c.schedule = sim::PipelineSchedule::one_f_one_b;
    w.push_back(par.where(tf::pp_schedule) + ": Interleaved1F1B with one stage per rank runs as 1F1B");
  }
  const bool even = std::all_of(split.begin(), split.end(), [&](int l) { return l == split.front(); });
  if (!even) c.partition = split;
}

// mode "full": every block; "selective" with "op": the per-op policy (Recompute::op_sac), with
// digits N: full recompute of every N-th block of each pipeline rank (recompute_every; 0 and 1
// checkpoint every block, activation_checkpoint.py:39-40).
void read_recompute(const Section& ac, sim::ParallelConfig& c, Warnings& w) {
  const std::string mode = ac.string(tf::ac_mode).value_or(std::string(tf::ac_selective));
  const std::string option = ac.string(tf::ac_selective_option).value_or(std::string(tf::ac_default_option));
  if (mode == tf::ac_none) return;
  if (mode == tf::ac_full) {
    c.recompute = sim::Recompute::full;
    return;
  }
  if (mode == tf::ac_memory_budget) {
    c.recompute = sim::Recompute::selective;
    w.push_back(ac.where(tf::ac_mode) +
                " = \"memory_budget\" (the compiler's partitioner chooses): modelled as "
                "selective recompute");
    return;
  }
  if (mode != tf::ac_selective)
    ac.fail(tf::ac_mode, "\"none\", \"selective\", \"full\" or \"memory_budget\", got \"" + mode + "\"");
  if (option == tf::ac_option_op) {
    c.recompute = sim::Recompute::op_sac;
    return;
  }
  if (option.empty() || option.size() > 9 ||
      !std::all_of(option.begin(), option.end(), [](unsigned char ch) { return std::isdigit(ch); }))
    ac.fail(tf::ac_selective_option, "\"op\" or a block frequency (digits), got \"" + option + "\"");
  c.recompute = sim::Recompute::full;
  const int every = std::stoi(option);
  if (every > 1) c.recompute_every = every;
}

sim::Fp8Recipe float8_recipe(const Section& f8, const Dims& d, sim::ParallelConfig& c, Warnings& w) {
  const auto recipe = f8.string(tf::recipe_name);
  const bool gather = f8.boolean(tf::fsdp_float8_all_gather).value_or(false);
  if (recipe && gather)
    f8.fail(tf::fsdp_float8_all_gather, "false with recipe_name (torchtitan asserts they are not combined)");
  if (gather && d.shard > 1) c.fp8_param_gather = true;
  if (gather && d.shard <= 1)
    w.push_back(f8.where(tf::fsdp_float8_all_gather) + " has no effect without data_parallel_shard_degree > 1");
  if (!recipe || *recipe == tf::recipe_tensorwise) return sim::Fp8Recipe::tensorwise;
  if (*recipe == tf::recipe_rowwise || *recipe == tf::recipe_rowwise_gw_hp) {
    w.push_back(f8.where(tf::recipe_name) + " = \"" + *recipe + "\" scales per row: modelled as blockwise FP8");
    return sim::Fp8Recipe::blockwise;
  }
  f8.fail(tf::recipe_name, "\"tensorwise\", \"rowwise\" or \"rowwise_with_gw_hp\", got \"" + *recipe + "\"");
}

void read_fp8(const Section& root, const Section& model, const Dims& d, sim::ParallelConfig& c,
              const std::string& source, Warnings& w) {
  const auto converters = model.strings(tf::converters);
  const auto has = [&](std::string_view name) {
    return std::find(converters.begin(), converters.end(), name) != converters.end();
  };
  for (const auto& conv : converters)
    if (conv != tf::converter_float8 && conv != tf::converter_float8_v01 && conv != tf::converter_mx)
      w.push_back(source + ": converter '" + conv + "' in '" + model.path(tf::converters) +
                  (conv.rfind(tf::converter_grouped_mm, 0) == 0
                       ? "' (MoE grouped GEMMs) is not modelled; ignored"
                       : "' is not a torchtitan converter shardplan models; ignored"));
  const Section f8 = root.child(tf::quantize).child(tf::quantize_linear).child(tf::float8);
  if (has(tf::converter_float8)) {
    c.fp8 = float8_recipe(f8, d, c, w);
    f8.warn_unknown(std::array{tf::recipe_name, tf::fsdp_float8_all_gather, tf::precompute_float8_scale},
                    tf::silent_float8_keys, w);
  } else if (has(tf::converter_float8_v01)) {
    const Section legacy = root.child(tf::float8);
    c.fp8 = float8_recipe(legacy.table() ? legacy : f8, d, c, w);
    w.push_back(source + ": converter 'float8' is torchtitan v0.1's name; " + std::string(tf::version) +
                " registers '" + std::string(tf::converter_float8) + "'");
  } else if (has(tf::converter_mx)) {
    c.fp8 = sim::Fp8Recipe::blockwise;
    w.push_back(source + ": MXFP8 (quantize.linear.mx, 1x32 blocks): modelled as blockwise FP8");
  }
}

// [compile] enable with "model" among the components: each block under torch.compile.
bool compiles_model(const Section& compile) {
  const auto components = compile.get(tf::compile_components)
                              ? compile.strings(tf::compile_components)
                              : std::vector<std::string>{std::string(tf::compile_model), std::string(tf::compile_loss)};
  const bool model = std::find(components.begin(), components.end(), tf::compile_model) != components.end();
  return compile.boolean(tf::compile_enable).value_or(false) && model;
}

void read_async_tp(const Section& par, const Section& compile, sim::ParallelConfig& c, Warnings& w) {
  const bool compiled = compiles_model(compile);
  if (compiled) c.fusion = sim::Fusion::compile;
  if (!par.boolean(tf::async_tp).value_or(false)) return;
  if (c.tp == 1) {
    w.push_back(par.where(tf::async_tp) + " has no effect with tensor_parallel_degree 1");
    return;
  }
  if (!compiled)
    par.fail(tf::async_tp,
             "compile.enable = true with \"model\" in compile.components alongside it (torchtitan "
             "raises: async TP needs torch.compile)");
  c.tp_comm_overlap = true;
}

void warn_sections(const toml::table& root, const std::string& source, Warnings& w) {
  static constexpr std::array<std::string_view, 8> read = {
      tf::model,   tf::training, tf::parallelism,     tf::activation_checkpoint,
      tf::compile, tf::quantize, tf::fault_tolerance, tf::float8};
  for (const auto& [k, v] : root) {
    (void)v;
    if (!listed(read, k.str()) && !listed(tf::silent_sections, k.str()))
      w.push_back(source + ": '" + std::string(k.str()) + "' is not a torchtitan " + std::string(tf::version) +
                  " section (torchtitan refuses it); ignored");
  }
}

}  // namespace

ImportResult import_torchtitan(std::string_view toml_text, const ImportContext& ctx, const std::string& source) {
  import_detail::check_context(ctx, source);
  toml::table root_table;
  try {
    root_table = toml::parse(toml_text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    throw sim::InputError(source + ":" + std::to_string(e.source().begin.line) + ":" +
                          std::to_string(e.source().begin.column) + ": invalid TOML: " + std::string(e.description()));
  }
  ImportResult r;
  auto& c = r.config;
  auto& w = r.warnings;
  const Section root(&root_table, "", source);
  const auto sec = [&](std::string_view name) { return root.child(name); };
  const Section model = sec(tf::model), training = sec(tf::training), par = sec(tf::parallelism);
  const Section ac = sec(tf::activation_checkpoint), compile = sec(tf::compile);
  const Dims d = read_parallel(par, ctx, c);
  read_experts(par, d, c);
  read_batch(training, par, ctx, c);
  read_precision(training, d, c, w);
  read_offload(training, d, c, w);
  const tf::Flavor* flavor = tf::find_flavor(model.string(tf::model_name).value_or("llama3"),
                                             model.string(tf::model_flavor).value_or("debugmodel"));
  read_pipeline(par, flavor, c, w);
  read_recompute(ac, c, w);
  read_fp8(root, model, d, c, source, w);
  read_async_tp(par, compile, c, w);
  if (sec(tf::fault_tolerance).boolean(tf::ft_enable).value_or(false))
    w.push_back(source + ": fault_tolerance.enable (TorchFT replica groups) is not modelled; ignored");
  warn_sections(root_table, source, w);
  model.warn_unknown(std::array{tf::model_name, tf::model_flavor, tf::converters}, tf::silent_model_keys, w);
  training.warn_unknown(std::array{tf::local_batch_size, tf::global_batch_size, tf::seq_len, tf::enable_cpu_offload,
                                   tf::dtype, tf::mixed_precision_param, tf::mixed_precision_reduce},
                        tf::silent_training_keys, w);
  par.warn_unknown(std::array{tf::dp_replicate, tf::dp_shard, tf::fsdp_reshard, tf::tp, tf::async_tp, tf::pp,
                              tf::pp_fqns, tf::pp_first_less, tf::pp_last_less, tf::pp_layers_per_stage,
                              tf::pp_schedule, tf::pp_schedule_csv, tf::pp_microbatch_size, tf::cp, tf::ep, tf::etp},
                   tf::silent_parallelism_keys, w);
  ac.warn_unknown(std::array{tf::ac_mode, tf::ac_selective_option}, tf::silent_ac_keys, w);
  compile.warn_unknown(std::array{tf::compile_enable, tf::compile_components}, tf::silent_compile_keys, w);
  import_detail::warn_layout(ctx, c, w);
  return r;
}

}  // namespace shardplan::interop
