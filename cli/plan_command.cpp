// `shardplan plan`: search the configuration space, rank, explain, export the best as a plan.
#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "formats/plan.hpp"
#include "frameworks/registry.hpp"
#include "interop/config_import.hpp"
#include "lora_defaults.hpp"
#include "planner/framework_space.hpp"
#include "planner/hardware_search.hpp"
#include "planner/search.hpp"
#include "planner/search_defaults.hpp"
#include "planner/space_parse.hpp"
#include "resilience_options.hpp"
#include "search_report.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct PlanOptions;
int run_plan(const PlanOptions& o);

// Flag values start from the search's own defaults (planner/search_defaults.hpp).
struct PlanOptions {
  using D = pl::SearchDefaults;
  static const D& d() { return pl::search_defaults(); }
  ResilienceOverrides resilience;
  std::string model, hardware, nodes = d().nodes, global_batch = d().global_batch_sizes,
                               micro_batches = d().micro_batch_sizes;
  std::string zero_stages = d().zero_stages, schedules = d().schedules, recomputes = d().recomputes;
  std::string precisions = d().precisions, virtual_stages = d().virtual_stages, mixed_precision = d().mixed_precision;
  std::string attention = d().attention, fp8 = d().fp8, cp = d().context_parallel, cp_kind = d().cp_kind,
              ep = d().expert_parallel, fusion = d().fusion, grad_accum = d().grad_accum_dtype;
  int devices_per_node = 0, seq_len = d().seq_len, packed_document_tokens = d().packed_document_tokens, top = d().top_k,
      threads = 0, max_nodes = d().max_nodes, max_tp = d().max_tp;
  bool no_mics = false, no_offload = false, no_sp = false, tp_across_nodes = false, json = false, quiet = false;
  bool tp_comm_overlap = false;
  std::string lora_ranks = std::to_string(d().lora_rank);
  double lora_alpha = d().lora_alpha, lora_dropout = d().lora_dropout, headroom = d().memory_headroom,
         max_usd = d().max_usd_per_hour, train_tokens = 0, dataset_tokens = 0, epochs = 1;
  std::string lora_base = d().lora_base;
  std::string lora_targets, objective = d().objective, require, forbid, out, why, rank_order = d().rank_order;
  std::string from;             // --from: the user's current setup (any format `simulate --import` reads)
  std::string framework;        // --framework NAME[@VERSION]: search what it runs (or --from's format)
  std::set<std::string> given;  // the fixed fields' keys the user named (a framework's defaults fill the rest)
};

// Records that the flag of `key` was given (a framework's defaults do not replace it).
CLI::Option* keyed(CLI::Option* opt, PlanOptions& o, const char* key) {
  return opt->each([&o, key](const std::string&) { o.given.insert(key); });
}

void add_options(CLI::App* cmd, PlanOptions& o) {
  cmd->add_option("--model", o.model, "Built-in model, model card or Hugging Face config.json")->required();
  cmd->add_option("--hardware", o.hardware,
                  "Built-in profile or profile JSON; a comma-separated list, or all (every built-in GPU, Trainium and "
                  "Gaudi profile): one search over each, ranked together")
      ->required();
  cmd->add_option("--nodes", o.nodes, "Node counts to consider: 16, 8,16,64 or 8-64 (powers of two)");
  cmd->add_option("--devices-per-node", o.devices_per_node, "Override the profile's devices per node");
  cmd->add_option("--global-batch-size", o.global_batch, "Sequences per step (list allowed)");
  cmd->add_option("--seq-len", o.seq_len, "Sequence length");
  cmd->add_option("--packed-document-tokens", o.packed_document_tokens,
                  "Sequences packed from documents of this many tokens on average, attending within each (not "
                  "searched; fused attention, cp 1); 0: one document per sequence (default)");
  cmd->add_option("--micro-batch-sizes", o.micro_batches, "Micro-batch sizes to try");
  cmd->add_option("--zero-stages", o.zero_stages, "ZeRO stages to try");
  keyed(cmd->add_option(
            "--schedules", o.schedules,
            "Pipeline schedules to try (gpipe,1f1b,interleaved; zb1p, zb2p, zbv, vhalf, vmin, dualpipev, dualpipe: "
            "split backward, with "
            "--framework the ones it runs are tried)"),
        o, "schedules");
  cmd->add_option("--virtual-stages", o.virtual_stages, "Model chunks per stage for interleaved");
  cmd->add_option("--recompute", o.recomputes,
                  "Recompute modes to try (default none,selective,full; op_sac on request)");
  cmd->add_option("--precision", o.precisions, "Precisions to try (bf16,fp16,fp32)");
  keyed(cmd->add_option("--mixed-precision", o.mixed_precision,
                        "How bf16/fp16 keep weights: master_weights (DeepSpeed, Megatron) or autocast (PyTorch AMP)"),
        o, "mixed_precision")
      ->check(CLI::IsMember(sim::enum_names<sim::MixedPrecision>()));
  keyed(cmd->add_option(
            "--attention", o.attention,
            "Attention kernel of every plan (not searched): flash (fused, FlashAttention-2 / SDPA; default, "
            "what current frameworks run), flash1 (FlashAttention v1 / Triton kernels) or eager (explicit softmax)"),
        o, "attention");
  keyed(cmd->add_option("--fusion", o.fusion,
                        "Kernels the framework fuses, for every plan (not searched): eager (default), megatron "
                        "(fused q/k/v and gate/up GEMMs, fused SwiGLU: Megatron-Core, NeMo) or compile "
                        "(torch.compile: fused pointwise ops, separate GEMMs)"),
        o, "fusion");
  keyed(cmd->add_option("--grad-accum-dtype", o.grad_accum,
                        "Gradient accumulation of every ZeRO 0/1 16-bit plan (not searched): param (in .grad; "
                        "default) or fp32 (an fp32 buffer reduced in fp32: DeepSpeed BF16_Optimizer, Megatron "
                        "main_grad)"),
        o, "grad_accum_dtype");
  cmd->add_option("--fp8", o.fp8,
                  "FP8 recipes to try: none (default: FP8 only when asked), auto (none and delayed where the "
                  "device has FP8 tensor cores: H100, Gaudi2), or a list of none,delayed,tensorwise,blockwise");
  cmd->add_option("--cp", o.cp,
                  "Context-parallel degrees to try: auto (1,2,4,8 for sequences of 8K tokens or more, else 1; "
                  "default) or a list");
  keyed(cmd->add_option("--cp-kind", o.cp_kind,
                        "Context-parallel attention of every plan (not searched): ring or all_to_all"),
        o, "cp_kind")
      ->check(CLI::IsMember(sim::enum_names<sim::CpKind>()));
  cmd->add_option("--framework", o.framework,
                  "Search only what this framework runs (NAME or NAME@VERSION: megatron, nemo, torchtitan, deepspeed, "
                  "accelerate-fsdp, smp-v2, neuronx-distributed, optimum-habana, shardrun, ...), with its defaults for "
                  "attention, fusion, mixed precision and gradient accumulation; --from sets it from the file");
  cmd->add_option("--ep", o.ep,
                  "Expert-parallel degrees to try on MoE models: auto (every power of two dividing the expert "
                  "count; default) or a list");
  cmd->add_flag("--tp-comm-overlap", o.tp_comm_overlap,
                "The framework pipelines SP's collectives with the GEMMs (Megatron-Core --tp-comm-overlap): "
                "every plan with sequence parallelism uses it");
  cmd->add_flag("--no-mics", o.no_mics, "Only shard over the whole data-parallel group");
  cmd->add_flag("--no-offload", o.no_offload, "Do not consider optimizer/activation offload");
  cmd->add_flag("--no-sequence-parallel", o.no_sp, "Do not consider sequence parallelism");
  cmd->add_option("--lora-rank", o.lora_ranks,
                  "LoRA rank (0 = full training); a list (4,8,16) compares the best plan of each");
  cmd->add_option("--lora-alpha", o.lora_alpha, "LoRA alpha");
  cmd->add_option("--lora-dropout", o.lora_dropout, "LoRA dropout");
  cmd->add_option("--lora-targets", o.lora_targets, "LoRA target modules, comma-separated");
  cmd->add_option("--lora-base", o.lora_base, "Frozen base weights under LoRA: bf16 (default) or nf4 (QLoRA)")
      ->check(CLI::IsMember(sim::enum_names<sim::LoraBase>()));
  cmd->add_option("--objective", o.objective, "What to optimise")
      ->check(CLI::IsMember(sim::enum_names<pl::Objective>()));
  cmd->add_option("--train-tokens", o.train_tokens, "Tokens to train on (time and cost to train)");
  cmd->add_option("--dataset-tokens", o.dataset_tokens, "Dataset size in tokens (with --epochs)");
  cmd->add_option("--epochs", o.epochs, "Epochs over --dataset-tokens");
  cmd->add_option("--max-nodes", o.max_nodes, "Constraint: at most this many nodes");
  cmd->add_option("--max-usd-per-hour", o.max_usd, "Constraint: cluster price per hour");
  cmd->add_option("--max-tp", o.max_tp, "Constraint: largest tensor-parallel degree");
  cmd->add_flag("--tp-across-nodes", o.tp_across_nodes, "Allow tensor parallelism across nodes");
  cmd->add_option("--headroom", o.headroom, "Fraction of device memory kept free");
  cmd->add_option("--require", o.require,
                  "Features every plan must use (pp,tp,zero,zero3,mics,offload,recompute,sp,interleaved)");
  cmd->add_option("--forbid", o.forbid, "Features no plan may use");
  cmd->add_option("--rank-order", o.rank_order, "Rank layout, fastest-varying first");
  cmd->add_option("--top", o.top, "How many plans to show")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o.threads, "Worker threads (0 = all cores)");
  cmd->add_option("--out", o.out, "Write the best plan (JSON) here");
  add_resilience_options(cmd, o.resilience);
  cmd->add_option("--why", o.why, "Explain why a configuration is not the plan, e.g. tp=8,pp=1,zero=1,mbs=2");
  cmd->add_option("--from", o.from,
                  "Your current setup (a ds_config, SMP, Megatron, torchtitan, Accelerate, NxD or Optimum-Habana "
                  "file, as `simulate --import` reads): search with its sequence length, batch, precision and LoRA "
                  "on its cluster (one --nodes count), and say what it costs against the best");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  cmd->add_flag("--quiet", o.quiet, "No progress bar");
}

pl::SearchSpace make_space(const PlanOptions& o, const sim::HardwareProfile& hw, const sim::ModelSpec& m) {
  pl::SearchSpace s;
  s.node_counts = planner::parse_int_list("--nodes", o.nodes, true);
  s.devices_per_node = o.devices_per_node;
  s.global_batch_sizes = planner::parse_int_list("--global-batch-size", o.global_batch, false);
  s.seq_len = o.seq_len;
  s.micro_batch_sizes = planner::parse_int_list("--micro-batch-sizes", o.micro_batches, false);
  s.zero_stages = planner::parse_int_list("--zero-stages", o.zero_stages, false);
  s.schedules = planner::parse_schedules(o.schedules);
  s.virtual_stages = planner::parse_int_list("--virtual-stages", o.virtual_stages, false);
  s.recomputes = planner::parse_recomputes(o.recomputes);
  s.precisions = planner::parse_precisions(o.precisions);
  s.mixed_precision = planner::parse_mixed_precision(o.mixed_precision);
  s.attention = planner::parse_attention(o.attention);
  s.fusion = planner::parse_fusion(o.fusion);
  s.grad_accum_dtype = planner::parse_grad_accum_dtype(o.grad_accum);
  s.packed_document_tokens = o.packed_document_tokens;
  sim::validate_packing(o.packed_document_tokens, o.seq_len, s.attention);
  s.fp8_recipes = planner::fp8_search_list(o.fp8, hw);
  s.context_parallel = planner::cp_search_list(o.cp, o.seq_len);
  s.cp_kind = *sim::cp_kind_from_string(o.cp_kind);  // CLI11 checked the name
  s.expert_parallel = planner::ep_search_list(o.ep, m);
  s.tp_comm_overlap = o.tp_comm_overlap;
  s.mics = !o.no_mics;
  if (o.no_offload) s.offload_optimizer = s.offload_activations = {false};
  if (o.no_sp) s.sequence_parallel = {false};
  s.lora.rank = planner::parse_int_list("--lora-rank", o.lora_ranks, false).front();
  s.lora.alpha = o.lora_alpha;
  s.lora.dropout = o.lora_dropout;
  s.lora.targets = planner::split_list(o.lora_targets);
  default_lora_targets(m, s.lora);
  s.lora.base = *sim::lora_base_from_string(o.lora_base);  // CLI11 checked the name
  s.rank_order = o.rank_order;
  return s;
}

pl::Constraints make_constraints(const PlanOptions& o) {
  pl::Constraints c;
  c.max_nodes = o.max_nodes;
  c.max_usd_per_hour = o.max_usd;
  c.max_tp = o.max_tp;
  c.tp_across_nodes = o.tp_across_nodes;
  c.memory_headroom = o.headroom;
  c.require = planner::split_list(o.require);
  c.forbid = planner::split_list(o.forbid);
  return c;
}

pl::Objective objective_of(const std::string& s) {
  return sim::enum_from_name<pl::Objective>(s).value_or(pl::Objective::throughput);  // CLI11 checked the name
}

nlohmann::json search_settings(const PlanOptions& o) {
  return {{"nodes", o.nodes},
          {"global_batch_size", o.global_batch},
          {"seq_len", o.seq_len},
          {"micro_batch_sizes", o.micro_batches},
          {"zero_stages", o.zero_stages},
          {"schedules", o.schedules},
          {"recompute", o.recomputes},
          {"precision", o.precisions},
          {"mixed_precision", o.mixed_precision},
          {"attention", o.attention},
          {"fusion", o.fusion},
          {"grad_accum_dtype", o.grad_accum},
          {"packed_document_tokens", o.packed_document_tokens},
          {"fp8", o.fp8},
          {"cp", o.cp},
          {"cp_kind", o.cp_kind},
          {"ep", o.ep},
          {"tp_comm_overlap", o.tp_comm_overlap},
          {"objective", o.objective},
          {"max_nodes", o.max_nodes},
          {"max_usd_per_hour", o.max_usd},
          {"max_tp", o.max_tp},
          {"require", o.require},
          {"forbid", o.forbid},
          {"headroom", o.headroom}};
}

// Several LoRA ranks: one search each, a comparison line per rank, the overall best exported.
int compare_lora_ranks(const PlanOptions& o, const std::vector<int>& ranks) {
  std::optional<std::pair<double, PlanOptions>> best;
  const sim::ModelSpec model = sim::load_model(o.model);
  sim::HardwareProfile hw = sim::load_hardware(o.hardware);
  apply_resilience(o.resilience, hw);
  for (int r : ranks) {
    PlanOptions one = o;
    one.lora_ranks = std::to_string(r);
    one.out.clear();
    one.json = false;
    pl::SearchSpace space = make_space(one, hw, model);
    pl::SearchOptions opts;
    opts.objective = objective_of(o.objective);
    opts.top_k = 1;
    opts.threads = o.threads;
    opts.cancel = &g_interrupted;
    const pl::SearchResult res = pl::search(model, hw, space, make_constraints(o), opts);
    std::cout << "LoRA r=" << r << ": ";
    if (res.ranked.empty()) {
      std::cout << "nothing fits\n";
      continue;
    }
    const auto& x = res.ranked.front();
    std::printf("%.0f tokens/s, %.2f GiB per device, %s trainable; %s\n", x.prediction.tokens_per_s,
                x.prediction.worst.total() / (1024.0 * 1024 * 1024),
                std::to_string(x.prediction.trainable_parameters).c_str(), x.candidate.key.c_str());
    std::fflush(stdout);
    if (!best || x.score < best->first) best = {x.score, one};
  }
  if (!best) return 1;
  std::cout << "\nbest: LoRA r=" << best->second.lora_ranks << "\n\n";
  PlanOptions chosen = best->second;
  chosen.out = o.out;
  chosen.json = o.json;
  return run_plan(chosen);
}

// --from FILE: the current setup on its cluster, and the search options fixed to its training job
// (sequence length, global batch, precision, LoRA, attention and fusion).
struct CurrentSetup {
  sim::ClusterSpec cluster;
  sim::ParallelConfig config;
};

CurrentSetup current_setup(PlanOptions& o, const sim::ModelSpec& model, const sim::HardwareProfile& hw) {
  const std::vector<int> nodes = planner::parse_int_list("--nodes", o.nodes, true);
  if (nodes.size() != 1)
    throw sim::InputError("--from: expected one --nodes count (the current cluster's), got '" + o.nodes + "'");
  CurrentSetup cur{sim::ClusterSpec{hw, nodes.front(), o.devices_per_node}, {}};
  interop::ImportContext ctx;
  ctx.devices = cur.cluster.devices();
  ctx.devices_per_node = cur.cluster.per_node();
  ctx.seq_len = o.seq_len;
  interop::ImportResult r = interop::import_config_file(o.from, ctx);
  if (o.framework.empty()) o.framework = r.framework;  // the file's framework, unless one was named
  for (const auto& w : r.warnings) std::cerr << "shardplan: note: " << w << "\n";
  cur.config = r.config;
  cur.config.memory_headroom = o.headroom;
  sim::validate_config(model, cur.cluster, cur.config);
  o.seq_len = cur.config.seq_len;
  o.global_batch = std::to_string(cur.config.global_batch_size);
  o.precisions = sim::to_string(cur.config.precision);
  o.attention = sim::to_string(cur.config.attention);
  o.fusion = sim::to_string(cur.config.fusion);
  o.given.insert({"attention", "fusion"});  // the setup's, not the framework's defaults
  // The setup's precision recipe is kept: an FP8 setup is compared with FP8 plans, a 16-bit one with 16-bit ones.
  if (o.fp8 == pl::search_defaults().fp8) o.fp8 = sim::to_string(cur.config.fp8);
  if (cur.config.lora.enabled()) {
    o.lora_ranks = std::to_string(cur.config.lora.rank);
    o.lora_alpha = cur.config.lora.alpha;
    o.lora_dropout = cur.config.lora.dropout;
    std::string targets;
    for (const auto& t : cur.config.lora.targets) targets += (targets.empty() ? "" : ",") + t;
    o.lora_targets = targets;
  }
  return cur;
}

// The constraints of the flags, narrowed (with `space`) to --framework's table when one is named.
pl::Constraints framework_constraints(const PlanOptions& o, pl::SearchSpace& space) {
  pl::Constraints constraints = make_constraints(o);
  if (!o.framework.empty())
    pl::narrow_to_framework(frameworks::parse_framework_spec(o.framework, "--framework"), space, constraints, o.given);
  return constraints;
}

pl::SearchOptions search_options(const PlanOptions& o) {
  pl::SearchOptions opts;
  opts.objective = objective_of(o.objective);
  opts.train_tokens = o.train_tokens > 0 ? o.train_tokens : o.dataset_tokens * o.epochs;
  opts.top_k = o.top;
  opts.threads = o.threads;
  opts.progress = !o.quiet && !o.json && ::isatty(STDERR_FILENO);
  opts.cancel = &g_interrupted;
  return opts;
}

// --out: the best row as a plan file, naming the framework searched.
void save_best(const PlanOptions& o, const sim::ModelSpec& model, const pl::SearchResult& r,
               const pl::Constraints& constraints) {
  if (o.out.empty() || r.ranked.empty()) return;
  const pl::Ranked& best = r.ranked.front();
  formats::save_plan({sim::version(), model, best.candidate.cluster, best.candidate.config, best.prediction,
                      search_settings(o), constraints.framework},
                     o.out);
}

// --hardware a,b,c or all: one search per profile, merged (planner/hardware_search.hpp).
int run_plan_on_hardware_list(const PlanOptions& o) {
  if (!o.from.empty() || !o.why.empty())
    throw sim::InputError("--hardware: one profile with --from or --why (the setup runs on one)");
  if (planner::parse_int_list("--lora-rank", o.lora_ranks, false).size() > 1)
    throw sim::InputError("--hardware: one profile with several --lora-rank values");
  const sim::ModelSpec model = sim::load_model(o.model);
  std::vector<sim::HardwareProfile> profiles = pl::hardware_list(o.hardware);
  for (auto& hw : profiles) apply_resilience(o.resilience, hw);
  PlanOptions one = o;
  one.fp8 = "none";  // the recipes below: FP8 where a device has it, skipped on the others
  pl::SearchSpace space = make_space(one, profiles.front(), model);
  if (o.fp8 == "auto") space.fp8_recipes = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
  else space.fp8_recipes = planner::parse_fp8_recipes(o.fp8);
  const pl::Constraints constraints = framework_constraints(o, space);
  const pl::SearchOptions opts = search_options(o);
  std::signal(SIGINT, on_sigint);
  const pl::HardwareSearch h = pl::search_hardware(model, profiles, space, constraints, opts);
  std::signal(SIGINT, SIG_DFL);
  const pl::SearchResult& r = h.result;
  save_best(o, model, r, constraints);
  if (o.json) {
    nlohmann::json j = search_json(r, std::nullopt);
    j["notes"] = h.notes;
    std::cout << j.dump(2) << "\n";
  } else {
    if (constraints.framework) std::cout << "framework: " << constraints.framework->display << "\n";
    std::cout << "hardware: " << profiles.size() << " profiles\n";
    print_search(std::cout, model, r, opts, std::nullopt, o.out);
    for (const auto& n : h.notes) std::cout << "note: " << n << "\n";
  }
  return r.ranked.empty() ? 1 : 0;
}

int run_plan(const PlanOptions& given) {
  PlanOptions o = given;
  if (o.hardware == "all" || o.hardware.find(',') != std::string::npos) return run_plan_on_hardware_list(o);
  std::optional<CurrentSetup> current;
  if (!o.from.empty()) current = current_setup(o, sim::load_model(o.model), sim::load_hardware(o.hardware));
  const std::vector<int> ranks = planner::parse_int_list("--lora-rank", o.lora_ranks, false);
  if (ranks.size() > 1) return compare_lora_ranks(o, ranks);
  const sim::ModelSpec model = sim::load_model(o.model);
  sim::HardwareProfile hw = sim::load_hardware(o.hardware);
  apply_resilience(o.resilience, hw);
  if (objective_of(o.objective) == pl::Objective::cost && hw.price.usd_per_hour <= 0)
    throw sim::InputError("--objective cost: '" + hw.name +
                          "' has no public price (price.usd_per_hour 0); expected a profile with its price, or "
                          "--objective throughput or time");
  pl::SearchSpace space = make_space(o, hw, model);
  if (space.lora.enabled() || !space.lora.targets.empty()) {
    sim::ParallelConfig probe;
    probe.lora = space.lora;
    (void)sim::resolve_lora_targets(model, probe.lora.targets);
    if (!space.lora.enabled()) throw sim::InputError("--lora-targets: needs --lora-rank > 0");
  }
  const pl::Constraints constraints = framework_constraints(o, space);
  const pl::SearchOptions opts = search_options(o);
  std::signal(SIGINT, on_sigint);
  const pl::SearchResult r = pl::search(model, hw, space, constraints, opts);
  std::signal(SIGINT, SIG_DFL);
  std::optional<std::string> why;
  if (current) {  // what the current setup costs against the best, in the "why not" slot
    why = "your setup (" + o.from +
          "): " + pl::why_not(model, current->cluster, current->config, r, constraints, opts.objective);
  } else if (!o.why.empty()) {
    auto [cluster, cfg] = planner::parse_config_spec(o.why, model, hw, space, constraints);
    why = pl::why_not(model, cluster, cfg, r, constraints, opts.objective);
  }
  save_best(o, model, r, constraints);
  if (o.json) std::cout << search_json(r, why).dump(2) << "\n";
  else {
    if (constraints.framework) std::cout << "framework: " << constraints.framework->display << "\n";
    print_search(std::cout, model, r, opts, why, o.out);
  }
  if (r.ranked.empty()) return 1;
  return 0;
}

}  // namespace

Run add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Search all configurations; rank, explain and export the best");
  auto o = std::make_shared<PlanOptions>();
  add_options(cmd, *o);
  return [o]() { return run_plan(*o); };
}

}  // namespace shardplan::cli
