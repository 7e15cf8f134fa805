// ParallelConfig from SageMaker model parallel v2 settings (names in smp_flags.hpp): the estimator
// document smp_v2_config writes, its "distribution", or the SMP v2 "parameters" alone; the
// example script's hyperparameters, when present, give the batch, sequence, precision,
// checkpointing and sharding strategy.
#include <algorithm>

#include "config_import_detail.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "smp_flags.hpp"
#include "smp_v2.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace sf = smp_flags;
using nlohmann::json;
using namespace import_detail;

namespace {

// The "parameters" object inside whichever wrapper the document has ({"distribution": ...},
// {"smdistributed": ...}, {"modelparallel": ...}, {"parameters": ...} or the parameters alone);
// `path` gets its dotted location for messages.
const json* find_parameters(const json& doc, std::string& path) {
  const json* d = &doc;
  path.clear();
  for (const std::string_view key : {std::string_view("distribution"), sf::smdistributed, sf::modelparallel}) {
    if (d->is_object() && d->contains(key)) {
      d = &(*d)[std::string(key)];
      path += std::string(key) + ".";
    }
  }
  if (d->is_object() && d->contains(sf::parameters)) {
    path += std::string(sf::parameters);
    return &(*d)[std::string(sf::parameters)];
  }
  if (!path.empty()) return nullptr;  // a wrapper without parameters
  return &doc;
}

int int_or(const json& obj, std::string_view key, long long dflt, long long min, const sim::JsonContext& jc) {
  return static_cast<int>(optional_int(obj, key, min, jc).value_or(dflt));
}

bool flag_or(const json& obj, std::string_view key, bool dflt, const sim::JsonContext& jc) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number_integer() && (*it == 0 || *it == 1)) return *it == 1;
  jc.fail(key, "true/false or 0/1");
}

void read_parameters(const json& p, const ImportContext& ctx, const sim::JsonContext& jc, sim::ParallelConfig& c,
                     int* hybrid) {
  if (!p.is_object()) jc.fail("parameters", "an object of SMP v2 parameters");
  c.tp = resolve_degree(optional_int(p, sf::tensor_parallel_degree, 1, jc), ctx.tp, sf::tensor_parallel_degree,
                        "tensor-parallel degree", jc);
  c.cp = int_or(p, sf::context_parallel_degree, 1, 1, jc);
  c.ep = int_or(p, sf::expert_parallel_degree, 1, 1, jc);
  c.etp = c.ep > 1 ? 1 : 0;
  c.pp = 1;
  if (ctx.pp > 1)
    jc.fail(sf::tensor_parallel_degree,
            "no pipeline: SMP v2 has none (the import was given pp " + std::to_string(ctx.pp) + ")");
  *hybrid = int_or(p, sf::hybrid_shard_degree, 0, 0, jc);
  c.offload_activations = flag_or(p, sf::activation_offloading, false, jc);
  if (ctx.devices % (c.tp * c.cp) != 0)
    jc.fail(sf::tensor_parallel_degree, "tp x cp dividing the " + std::to_string(ctx.devices) + " devices");
  c.dp = ctx.devices / (c.tp * c.cp);
  c.sequence_parallel = c.tp > 1;  // SMP's TE tensor parallelism shards the sequence too
}

// The example script's hyperparameters (their defaults: arguments.py).
void read_hyperparameters(const json& hp, const ImportContext& ctx, const sim::JsonContext& jc, sim::ParallelConfig& c,
                          std::string* strategy) {
  const sim::JsonContext hc = jc.child(std::string(sf::hyperparameters));
  if (!hp.is_object()) jc.fail(sf::hyperparameters, "an object");
  c.micro_batch_size = int_or(hp, sf::train_batch_size, ctx.micro_batch_size > 0 ? ctx.micro_batch_size : 2, 1, hc);
  c.seq_len = int_or(hp, sf::max_context_width, 2048, 1, hc);
  c.precision = flag_or(hp, sf::bf16, true, hc) ? sim::Precision::bf16 : sim::Precision::fp32;
  if (flag_or(hp, sf::fp8, false, hc)) {
    if (!flag_or(hp, sf::use_smp_implementation, false, hc))
      hc.fail(sf::fp8, "use_smp_implementation 1 with it (the script builds the FP8 recipe only then)");
    c.fp8 = sim::Fp8Recipe::delayed;
  }
  c.recompute = flag_or(hp, sf::activation_checkpointing, true, hc) ? sim::Recompute::full : sim::Recompute::none;
  if (flag_or(hp, sf::use_smp_implementation, false, hc)) c.fusion = sim::Fusion::megatron;  // TE's fused layers
  *strategy = hp.contains(sf::sharding_strategy) ? sim::get_string(hp, sf::sharding_strategy, hc) : "hybrid_shard";
  if (hp.contains(sf::cp_comm_type)) {
    const std::string kind = sim::get_string(hp, sf::cp_comm_type, hc);
    if (kind != "p2p" && kind != "all_gather") hc.fail(sf::cp_comm_type, "p2p or all_gather");
  }
}

void apply_sharding(const std::string& strategy, int hybrid, const sim::JsonContext& jc, sim::ParallelConfig& c) {
  if (strategy == "no_shard" || hybrid == 1) {
    c.zero_stage = 0;
    return;
  }
  if (strategy == "hybrid_shard" || strategy == "full_shard") c.zero_stage = 3;
  else if (strategy == "_hybrid_shard_zero2" || strategy == "shard_grad_op") c.zero_stage = 2;
  else jc.fail(sf::sharding_strategy, "no_shard, shard_grad_op, hybrid_shard, _hybrid_shard_zero2 or full_shard");
  const int group = hybrid == 0 || strategy == "full_shard" || strategy == "shard_grad_op" ? c.dp * c.cp : hybrid;
  if (group % c.cp != 0 || c.dp % (group / c.cp) != 0)
    jc.fail(sf::hybrid_shard_degree, "a multiple of context_parallel_degree " + std::to_string(c.cp) +
                                         " dividing dp x cp = " + std::to_string(c.dp * c.cp));
  c.sharding_degree = group / c.cp == c.dp ? 0 : group / c.cp;
}

}  // namespace

bool is_smp_v2(const json& doc) {
  if (!doc.is_object()) return false;
  std::string path;
  const json* p = find_parameters(doc, path);
  if (p != nullptr && p->is_object())
    for (const auto key :
         {sf::hybrid_shard_degree, sf::context_parallel_degree, sf::expert_parallel_degree, sf::activation_offloading})
      if (p->contains(key)) return true;
  return doc.contains(sf::hyperparameters) && doc[std::string(sf::hyperparameters)].is_object() &&
         doc[std::string(sf::hyperparameters)].contains(sf::max_context_width);
}

ImportResult import_smp_v2(const json& doc, const ImportContext& ctx, const std::string& source) {
  check_context(ctx, source);
  if (!doc.is_object()) throw sim::InputError(source + ": expected a JSON object (SMP v2 settings)");
  std::string path;
  const json* p = find_parameters(doc, path);
  if (p == nullptr)
    throw sim::InputError(source + ": no SMP v2 parameters (distribution.smdistributed.modelparallel.parameters)");
  const sim::JsonContext jc{source, path};
  ImportResult r;
  sim::ParallelConfig& c = r.config;
  int hybrid = 0;
  read_parameters(*p, ctx, jc, c, &hybrid);
  std::string strategy = "hybrid_shard";
  if (doc.contains(sf::hyperparameters)) {
    read_hyperparameters(doc[std::string(sf::hyperparameters)], ctx, sim::JsonContext{source, ""}, c, &strategy);
  } else {
    c.micro_batch_size = ctx.micro_batch_size > 0 ? ctx.micro_batch_size : 2;
    c.seq_len = ctx.seq_len;
    c.precision = ctx.precision.value_or(sim::Precision::bf16);
    c.recompute = sim::Recompute::full;
    r.warnings.push_back(source + ": no hyperparameters: the example script's defaults (train_batch_size " +
                         std::to_string(c.micro_batch_size) + ", bf16, activation checkpointing, hybrid_shard)");
  }
  apply_sharding(strategy, hybrid, sim::JsonContext{source, path}, c);
  c.global_batch_size = c.micro_batch_size * c.dp;  // the script has no gradient accumulation
  warn_unknown_keys(*p, jc,
                    {sf::hybrid_shard_degree, sf::tensor_parallel_degree, sf::context_parallel_degree,
                     sf::expert_parallel_degree, sf::activation_offloading},
                    {sf::activation_loading_horizon, sf::cache_flush_warnings, sf::allow_empty_shards, sf::random_seed},
                    r.warnings);
  warn_layout(ctx, c, r.warnings);
  return r;
}

}  // namespace shardplan::interop
