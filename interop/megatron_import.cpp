// ParallelConfig from Megatron-LM / Megatron-Core arguments (a pretrain_gpt.py command line or the
// launch script around it; names in megatron_flags.hpp, checked at Megatron-LM d98e8a64).
//
// The model's shape flags (--num-layers, --hidden-size, ...) describe the model, which comes from
// --model: they are read only where a setting needs them (--num-layers for per-virtual-stage
// layer counts, uneven stages and a pipeline layout's block count). The data, tokenizer,
// optimizer, logging and checkpoint flags do not matter to the cost model and are accepted
// silently; any other flag is reported.
#include <algorithm>

#include "command_args.hpp"
#include "config_import.hpp"
#include "config_import_detail.hpp"
#include "megatron_flags.hpp"
#include "megatron_layout.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace mf = megatron_flags;

namespace {

// Flags shardplan does not model, accepted without a warning (prefixes end in '-').
constexpr std::string_view kSilent[] = {
    "--data-",
    "--split",
    "--tokenizer-",
    "--vocab-",
    "--merge-file",
    "--lr",
    "--lr-",
    "--min-lr",
    "--weight-decay",
    "--clip-grad",
    "--adam-",
    "--init-method-std",
    "--log-",
    "--tensorboard-",
    "--wandb-",
    "--save",
    "--load",
    "--eval-",
    "--train-iters",
    "--train-samples",
    "--exit-",
    "--seed",
    "--use-mcore-models",
    "--transformer-impl",
    "--no-masked-softmax-fusion",
    "--no-bias-",
    "--make-vocab-size-divisible-by",
    "--distributed-backend",
    "--distributed-timeout-minutes",
    "--timing-log-level",
    "--ckpt-",
    "--mock-data",
    "--norm-epsilon",
    "--rotary-base",
    "--use-rotary-position-embeddings",
    "--no-position-embedding",
    "--optimizer",
    "--bias-",
    "--sgd-",
    "--loss-scale",
    "--initial-loss-scale",
    "--hysteresis",
    "--manual-gc",
    "--no-gradient-accumulation-fusion",
    "--use-checkpoint-args",
    "--no-load-",
    "--finetune",
    "--tp-comm-overlap-cfg",
    "--moe-router-",
    "--moe-aux-loss-coeff",
    "--moe-z-loss-coeff",
    "--moe-permute-fusion",
    "--cross-entropy-",
    "--master_",
    "--master-",
    "--node_rank",
    "--node-rank",
    "--rdzv",
    "--max_restarts",
    "--untie-embeddings-and-output-weights",
    "--ffn-hidden-size",
    "--hidden-size",
    "--num-attention-heads",
    "--kv-channels",
    "--group-query-attention",
    "--num-query-groups",
    "--swiglu",
    "--normalization",
    "--position-embedding-type",
    "--rotary-percent",
    "--qk-layernorm",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--attention-dropout",
    "--hidden-dropout",
    "--multi-latent-attention",
    "--q-lora-rank",
    "--kv-lora-rank",
    "--qk-head-dim",
    "--qk-pos-emb-head-dim",
    "--v-head-dim",
    "--num-experts",
    "--moe-ffn-hidden-size",
    "--moe-shared-expert-",
    "--moe-layer-freq",
    "--moe-token-dispatcher-type",
    "--moe-grouped-gemm",
    "--max-position-embeddings",
    "--fp8-amax-",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--standalone",
    "--nnodes",
    "--nproc-per-node",
    "--nproc_per_node",
};

bool silent(const std::string& flag) {
  return std::any_of(std::begin(kSilent), std::end(kSilent), [&](std::string_view s) {
    return s.back() == '-' || s.back() == '_' ? flag.rfind(s, 0) == 0 : flag == s;
  });
}

[[noreturn]] void fail(const CommandArgs& a, std::string_view flag, const std::string& what) {
  throw sim::InputError(a.source() + ": " + std::string(flag) + ": expected " + what);
}

int degree(const CommandArgs& a, std::string_view flag) { return static_cast<int>(a.integer(flag, 1).value_or(1)); }

void read_parallel(const CommandArgs& a, const ImportContext& ctx, sim::ParallelConfig& c) {
  c.tp = degree(a, mf::tp);
  c.pp = degree(a, mf::pp);
  c.cp = degree(a, mf::cp);
  if (ctx.tp > 0 && ctx.tp != c.tp)
    fail(a, mf::tp, "the tensor-parallel degree given to the import (" + std::to_string(ctx.tp) + ")");
  if (ctx.pp > 0 && ctx.pp != c.pp)
    fail(a, mf::pp, "the pipeline degree given to the import (" + std::to_string(ctx.pp) + ")");
  if (const auto kind = a.value(mf::cp_comm_type)) {
    if (*kind == "p2p") c.cp_kind = sim::CpKind::ring;
    else if (*kind == "a2a") c.cp_kind = sim::CpKind::all_to_all;
    else fail(a, mf::cp_comm_type, "p2p (ring) or a2a (Ulysses), the kinds shardplan models; got '" + *kind + "'");
  }
  c.ep = degree(a, mf::ep);
  c.etp = static_cast<int>(a.integer(mf::etp, 1).value_or(0));
  c.sequence_parallel = a.has(mf::sequence_parallel);
  c.tp_comm_overlap = a.has(mf::tp_comm_overlap);
  c.rank_order = a.has(mf::tp_pp_dp_mapping) ? "tp-pp-dp" : "tp-dp-pp";
  const int model_parallel = c.tp * c.pp * c.cp;
  if (ctx.devices % model_parallel != 0)
    throw sim::InputError(a.source() + ": " + std::string(mf::tp) + " x " + std::string(mf::pp) + " x " +
                          std::string(mf::cp) + " = " + std::to_string(model_parallel) +
                          ": expected a divisor of the " + std::to_string(ctx.devices) + " devices");
  c.dp = ctx.devices / model_parallel;
}

// --pipeline-model-parallel-layout: the blocks of every chunk, the virtual stages with them
// (A:941-952); alone among the pipeline-split flags (A:928-939, TC:2245-2259).
void read_layout(const CommandArgs& a, const std::string& layout, std::optional<long long> layers,
                 sim::ParallelConfig& c) {
  for (const std::string_view other : {mf::virtual_stages, mf::layers_per_virtual_stage, mf::first_stage_layers,
                                       mf::last_stage_layers, mf::account_embedding, mf::account_loss})
    if (a.has(other)) fail(a, mf::pipeline_layout, "no " + std::string(other) + " with it (Megatron refuses both)");
  std::vector<int> chunks;
  try {
    chunks = parse_megatron_layout(layout, c.pp, layers.value_or(0), mf::pipeline_layout);
  } catch (const sim::InputError& e) { throw sim::InputError(a.source() + ": " + e.what()); }
  c.virtual_stages = static_cast<int>(chunks.size()) / c.pp;
  if (c.virtual_stages > 1) c.schedule = sim::PipelineSchedule::interleaved;
  if (!std::all_of(chunks.begin(), chunks.end(), [&](int l) { return l == chunks.front(); })) c.partition = chunks;
}

// --account-for-embedding/loss-in-pipeline-split: an even split of the blocks plus one layer for
// each, taken off the first and the last chunk, which may be left with none
// (transformer_block.py:148-201).
void read_accounted_split(const CommandArgs& a, long long layers, int embedding, int loss, sim::ParallelConfig& c) {
  const std::string_view flag = embedding ? mf::account_embedding : mf::account_loss;
  const long long chunks = static_cast<long long>(c.pp) * c.virtual_stages, counted = layers + embedding + loss;
  if (counted % chunks != 0)  // TC:2370-2400
    fail(a, flag,
         "--num-layers + 1 for each of the embedding and loss flags (" + std::to_string(counted) +
             ") divisible by pipeline size x virtual stages (" + std::to_string(chunks) + ")");
  c.partition.assign(static_cast<std::size_t>(chunks), static_cast<int>(counted / chunks));
  c.partition.front() -= embedding;
  c.partition.back() -= loss;
}

// Interleaving and uneven stages (they need the layer count), or a layout.
void read_pipeline(const CommandArgs& a, sim::ParallelConfig& c) {
  const auto layers = a.integer(mf::num_layers, 1);
  if (const auto layout = a.value(mf::pipeline_layout)) {
    read_layout(a, *layout, layers, c);
    return;
  }
  const int embedding = a.has(mf::account_embedding) ? 1 : 0, loss = a.has(mf::account_loss) ? 1 : 0;
  const auto chunks = a.integer(mf::virtual_stages, 1);
  const auto per_chunk = a.integer(mf::layers_per_virtual_stage, 1);
  if (chunks && per_chunk)
    fail(a, mf::virtual_stages, std::string("one of it and ") + std::string(mf::layers_per_virtual_stage));
  if (per_chunk) {  // A:953-975: the embedding and the loss counted as layers here too
    const long long counted = layers.value_or(0) + embedding + loss;
    if (!layers || counted % (*per_chunk * c.pp) != 0)
      fail(a, mf::layers_per_virtual_stage, "a divisor of --num-layers / pipeline size (give --num-layers)");
    c.virtual_stages = static_cast<int>(counted / (*per_chunk * c.pp));
  } else if (chunks) {
    c.virtual_stages = static_cast<int>(*chunks);
  }
  if (c.virtual_stages > 1) c.schedule = sim::PipelineSchedule::interleaved;
  const auto first = a.integer(mf::first_stage_layers, 1), last = a.integer(mf::last_stage_layers, 1);
  if ((embedding || loss) && c.pp > 1) {
    const std::string_view flag = embedding ? mf::account_embedding : mf::account_loss;
    if (first || last) fail(a, flag, "no --decoder-first/last-pipeline-num-layers with it (Megatron refuses both)");
    if (!layers) fail(a, flag, "--num-layers with it (the split needs it)");
    read_accounted_split(a, *layers, embedding, loss, c);
    return;
  }
  if (!first && !last) return;
  if (!layers)
    fail(a, first ? mf::first_stage_layers : mf::last_stage_layers, "--num-layers with it (the split needs it)");
  if (c.virtual_stages > 1) fail(a, mf::first_stage_layers, "no interleaving with uneven stages in this import");
  const long long rest = *layers - first.value_or(0) - last.value_or(0);
  const int middle = c.pp - (first ? 1 : 0) - (last ? 1 : 0);
  // TC:2340-2353: the middle stages get an even share, none when there are none.
  if (c.pp < 2 || rest < 0 || (middle > 0 && (rest == 0 || rest % middle != 0)) || (middle == 0 && rest != 0))
    fail(a, mf::first_stage_layers,
         "first/last stage layers that leave an even split of the rest over the middle stages");
  c.partition.assign(static_cast<std::size_t>(c.pp), middle > 0 ? static_cast<int>(rest / middle) : 0);
  if (first) c.partition.front() = static_cast<int>(*first);
  if (last) c.partition.back() = static_cast<int>(*last);
}

void read_data_parallel(const CommandArgs& a, sim::ParallelConfig& c, std::vector<std::string>& warnings) {
  if (a.has(mf::megatron_fsdp)) {
    const std::string s = a.value(mf::fsdp_sharding).value_or("optim_grads_params");
    if (s == "no_shard") c.zero_stage = 0;
    else if (s == "optim") c.zero_stage = 1;
    else if (s == "optim_grads") c.zero_stage = 2;
    else if (s == "optim_grads_params") c.zero_stage = 3;
    else fail(a, mf::fsdp_sharding, "no_shard, optim, optim_grads or optim_grads_params");
  } else if (a.has(mf::distributed_optimizer)) {
    c.zero_stage = 1;
  }
  if (const auto instances = a.integer(mf::optimizer_instances, 1); instances && *instances > 1) {
    if (c.dp % *instances != 0)
      fail(a, mf::optimizer_instances, "a divisor of the data-parallel size " + std::to_string(c.dp));
    c.sharding_degree = c.dp / static_cast<int>(*instances);
  }
  c.offload_optimizer = a.has(mf::optimizer_cpu_offload);
  if (c.offload_optimizer && c.zero_stage == 0)
    fail(a, mf::optimizer_cpu_offload, "--use-distributed-optimizer with it");
  (void)a.has(mf::precision_aware_optimizer);  // read (a known flag): no effect on the layout
  if (a.has(mf::fp32_grad_reduce)) c.grad_accum_dtype = sim::GradAccumDtype::fp32;
  if (const auto n = a.integer(mf::activation_offload_layers, 0); n && *n > 0) {
    c.offload_activations = true;
    warnings.push_back(a.source() + ": " + std::string(mf::activation_offload_layers) + " " + std::to_string(*n) +
                       ": modelled as offloading every stored activation");
  }
}

void read_batch(const CommandArgs& a, const ImportContext& ctx, sim::ParallelConfig& c,
                std::vector<std::string>& warnings) {
  const auto mbs = a.integer(mf::micro_batch, 1);
  if (mbs && ctx.micro_batch_size > 0 && *mbs != ctx.micro_batch_size)
    fail(a, mf::micro_batch, "the micro-batch size given to the import (" + std::to_string(ctx.micro_batch_size) + ")");
  c.micro_batch_size = static_cast<int>(mbs ? *mbs : (ctx.micro_batch_size > 0 ? ctx.micro_batch_size : 1));
  if (!mbs && ctx.micro_batch_size == 0) warnings.push_back(a.source() + ": no --micro-batch-size; assumed 1");
  const long long gbs = a.integer(mf::global_batch, 1).value_or(static_cast<long long>(c.micro_batch_size) * c.dp);
  if (gbs % (static_cast<long long>(c.micro_batch_size) * c.dp) != 0)
    fail(a, mf::global_batch,
         "a multiple of micro-batch x data-parallel size = " +
             std::to_string(static_cast<long long>(c.micro_batch_size) * c.dp));
  c.global_batch_size = static_cast<int>(gbs);
  c.seq_len = static_cast<int>(a.integer(mf::seq_length, 1).value_or(ctx.seq_len));
  if (const auto cf = a.number(mf::capacity_factor)) {
    if (*cf <= 0) fail(a, mf::capacity_factor, "a factor > 0 (absent: dropless)");
    c.moe_capacity_factor = *cf;
  }
}

void read_compute(const CommandArgs& a, const ImportContext& ctx, sim::ParallelConfig& c) {
  const auto granularity = a.value(mf::recompute_granularity);
  if (a.has(mf::recompute_activations) || granularity == "selective") {
    c.recompute = sim::Recompute::selective;
  } else if (granularity == "full") {
    c.recompute = sim::Recompute::full;
    const std::string method = a.value(mf::recompute_method).value_or("uniform");
    const long long n = a.integer(mf::recompute_num_layers, 1).value_or(1);
    if (method == "block") c.recompute_num_layers = static_cast<int>(n);
    else if (method != "uniform") fail(a, mf::recompute_method, "uniform or block");
    else if (n != 1)
      fail(a, mf::recompute_num_layers, "1 with --recompute-method uniform (every layer), the one shardplan models");
  } else if (granularity) {
    fail(a, mf::recompute_granularity, "full or selective");
  }
  if (a.has(mf::bf16) && a.has(mf::fp16)) fail(a, mf::bf16, "one of --bf16 and --fp16");
  c.precision = a.has(mf::bf16)   ? sim::Precision::bf16
                : a.has(mf::fp16) ? sim::Precision::fp16
                                  : ctx.precision.value_or(sim::Precision::fp32);
  if (a.value(mf::fp8_format)) {
    const std::string recipe = a.value(mf::fp8_recipe).value_or("delayed");
    const auto r = sim::fp8_recipe_from_string(recipe);
    if (!r || *r == sim::Fp8Recipe::none)
      fail(a, mf::fp8_recipe, "delayed, tensorwise or blockwise; got '" + recipe + "'");
    c.fp8 = *r;
    c.fp8_param_gather = a.has(mf::fp8_param_gather);
  }
  const std::string backend = a.value(mf::attention_backend).value_or("auto");
  if (backend == "unfused") c.attention = sim::AttentionKind::eager;
  else if (backend == "flash" || backend == "fused" || backend == "auto" || backend == "local")
    c.attention = sim::AttentionKind::flash;
  else fail(a, mf::attention_backend, "flash, fused, unfused, local or auto");
  (void)a.has(mf::use_flash_attn);   // read (a known flag): --attention-backend decides
  c.fusion = sim::Fusion::megatron;  // Megatron-Core fuses q/k/v, gate/up and SwiGLU
}

}  // namespace

ImportResult import_megatron(std::string_view script, const ImportContext& ctx, const std::string& source) {
  import_detail::check_context(ctx, source);
  const CommandArgs a(shell_words(script, source), source);
  if (!a.has(mf::tp) && !a.has(mf::micro_batch) && !a.has(mf::num_layers))
    throw sim::InputError(source +
                          ": no Megatron-LM arguments (--tensor-model-parallel-size, --micro-batch-size, ...)");
  ImportResult r;
  sim::ParallelConfig& c = r.config;
  // The launcher's counts, where the script gives numbers (not $VARIABLES).
  const auto count = [&](std::string_view flag) -> std::optional<long long> {
    const auto v = a.value(flag);
    if (!v || v->empty() || (*v)[0] == '$') return std::nullopt;
    return a.integer(flag, 1);
  };
  const auto nnodes = count(mf::nnodes);
  const auto nproc = a.has(mf::nproc_per_node) ? count(mf::nproc_per_node) : count(mf::nproc_per_node_underscore);
  if (nnodes && nproc && *nnodes * *nproc != ctx.devices)
    throw sim::InputError(source + ": torchrun --nnodes x --nproc-per-node = " + std::to_string(*nnodes * *nproc) +
                          ": expected the cluster's " + std::to_string(ctx.devices) + " devices");
  read_parallel(a, ctx, c);
  read_pipeline(a, c);
  read_data_parallel(a, c, r.warnings);
  read_batch(a, ctx, c, r.warnings);
  read_compute(a, ctx, c);
  for (const auto& flag : a.unread_flags())
    if (!silent(flag)) r.warnings.push_back(source + ": '" + flag + "' is not a setting shardplan models; ignored");
  import_detail::warn_layout(ctx, c, r.warnings);
  return r;
}

}  // namespace shardplan::interop
