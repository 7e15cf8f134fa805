// torchtitan job config (TOML) and torchrun line from a Plan. Written for torchtitan v0.2.2
// (73a0e697), the last release with TOML job configs; every key, value and the launch line are
// the ones in torchtitan_flags.hpp, checked there against torchtitan/config/job_config.py,
// run_train.sh and multinode_trainer.slurm at that tag. torchtitan HEAD (after 9810191b) has no
// TOML: it runs `--module <model> --config <recipe>` with `--section.key value` overrides; the
// notes say so.
//
// How the plan maps (sources at v0.2.2):
//   dp and ZeRO   torchtitan's data parallelism is FSDP2 over data_parallel_shard_degree x cp, HSDP
//                 with data_parallel_replicate_degree > 1, and DDP only when it is the sole
//                 parallelism (llama3/infra/parallelize.py:125-156). ZeRO-3 = reshard after forward
//                 "always", ZeRO-2 = "never"; the shard degree is the ZeRO group (HSDP replicates
//                 over the rest). ZeRO-0/1 exist only as DDP alone: otherwise they run as ZeRO-2 (noted).
//   precision     FSDP's MixedPrecisionPolicy gathers bf16 from fp32 shards (the plan's bf16 master
//                 weights); without FSDP, torch.autocast for DDP / one device, and no mixed precision
//                 at all with TP or PP (distributed/utils.py:243-263): there training.dtype bfloat16.
//   pipeline      an even split of a torchtitan flavor as pipeline_parallel_layers_per_stage (the
//                 embeddings and output not counted as layers), any other as module_fqns_per_model_part
//                 (each stage's modules): exact either way; stage i runs on rank i % pp ("loop").
//   batch         local_batch_size is per data-parallel rank per accumulation step; with PP it is
//                 split into pipeline_parallel_microbatch_size micro-batches (pipeline_parallel.py:186-194).
#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "launch_export.hpp"
#include "simulator/errors.hpp"
#include "torchtitan.hpp"
#include "torchtitan_flags.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace tf = torchtitan_flags;
using formats::comment_text;
using formats::shell_quote;

namespace {

std::string str(std::string_view s) { return std::string(s); }

[[noreturn]] void refuse(const std::string& why) { throw sim::InputError("torchtitan export: " + why); }

bool is_torchtitan_device(const sim::HardwareProfile& hw) {
  if (is_gpu_hardware(hw)) return true;  // NVIDIA (CUDA)
  std::string name = hw.device.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name.find("INSTINCT") != std::string::npos || name.find("RADEON") != std::string::npos;  // ROCm
}

// How the plan's data parallelism runs in torchtitan.
struct DpLayout {
  int replicate = 1;    // data_parallel_replicate_degree
  int shard = 1;        // data_parallel_shard_degree
  bool fsdp = false;    // FSDP2 applied (shard > 1 or cp > 1)
  bool reshard = true;  // fsdp_reshard_after_forward always (ZeRO-3) / never
};

// The ZeRO group of the plan (1: nothing sharded over dp).
int zero_group(const sim::ParallelConfig& c) { return c.zero_stage == 0 ? 1 : c.shard_group(); }
bool dp_alone(const sim::ParallelConfig& c) { return c.tp == 1 && c.pp == 1 && c.cp == 1; }

DpLayout dp_layout(const sim::ParallelConfig& c) {
  DpLayout d;
  const int group = zero_group(c);
  if (group == 1 && (dp_alone(c) || c.dp == 1)) {
    d.replicate = c.dp;  // DDP (or one device); FSDP still over cp when cp > 1
  } else if (group == 1) {
    d.shard = c.dp;  // DDP only runs alone (parallelize.py:148-151): FSDP over dp instead (noted)
  } else {
    d.shard = group;  // HSDP when the group is smaller than dp
    d.replicate = c.dp / group;
  }
  d.fsdp = d.shard > 1 || c.cp > 1;
  d.reshard = c.zero_stage == 3;
  return d;
}

// What torchtitan cannot run at all.
void check_runnable(const formats::Plan& plan) {
  const auto& c = plan.config;
  const auto& m = plan.model;
  if (!is_torchtitan_device(plan.cluster.hardware))
    refuse("torchtitan runs on CUDA or ROCm GPUs; the plan's device is " +
           comment_text(plan.cluster.hardware.device.name) + " (" + comment_text(plan.cluster.hardware.name) + ")");
  if (m.kind == sim::ModelKind::encoder)
    refuse("model '" + comment_text(m.name) + "' is an encoder; torchtitan trains causal decoders only");
  if (c.lora.enabled())
    refuse("LoRA (rank " + std::to_string(c.lora.rank) + "): torchtitan " + str(tf::version) +
           " has no LoRA / PEFT (it trains every weight)");
  if (c.precision == sim::Precision::fp16)
    refuse("fp16: torchtitan's training.mixed_precision_param and training.dtype are bfloat16 or float32 only");
  if (c.offload_activations)
    refuse("activation offload: torchtitan " + str(tf::version) +
           " has no activation offload (only FSDP's "
           "training.enable_cpu_offload of parameters, gradients and optimizer states)");
  const DpLayout d = dp_layout(c);
  if (c.offload_optimizer && !d.fsdp)
    refuse(
        "optimizer offload is FSDP2's CPUOffloadPolicy in torchtitan (training.enable_cpu_offload): it needs "
        "data-parallel sharding (dp > 1 with ZeRO, or cp > 1)");
  const long long divisor = 2LL * c.tp * c.cp;
  if (c.seq_len % divisor != 0)
    refuse("training.seq_len " + std::to_string(c.seq_len) + ": torchtitan needs it divisible by tp x 2 x cp = " +
           std::to_string(divisor) + " (ParallelDims.seq_len_divisor)");
  if (m.is_moe() && c.ep > 1) {
    const int etp = c.expert_tp();
    if (etp != 1 && etp != c.tp)
      refuse("expert tensor parallel " + std::to_string(etp) + ": torchtitan supports " + str(tf::etp) +
             " 1 or = tp (" + std::to_string(c.tp) + ") only");
    const long long pool = static_cast<long long>(d.shard) * c.cp * c.tp;
    if (pool % (static_cast<long long>(c.ep) * etp) != 0)
      refuse("ep x etp = " + std::to_string(c.ep * etp) + " must divide data_parallel_shard_degree x cp x tp = " +
             std::to_string(pool) + " (torchtitan takes the expert ranks from the FSDP and TP ranks)");
  }
}

struct ModelChoice {
  std::string_view name, flavor, hf_assets_path;
  bool exact = false;
};

// The plan's model as a flavor: the card's own when it has one, else the nearest of the same kind
// (dense / MoE) by hidden size and expert count (log distance).
ModelChoice choose_flavor(const sim::ModelSpec& m) {
  for (const auto& cf : tf::card_flavors)
    if (cf.card == m.name) return {cf.name, cf.flavor, cf.hf_assets_path, true};
  const tf::Flavor* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const auto& f : tf::flavors) {
    if ((f.experts > 0) != m.is_moe() || (!m.is_moe() && f.name != "llama3")) continue;
    double d = std::abs(std::log(static_cast<double>(std::max<int64_t>(m.hidden, 1)) / f.dim));
    if (m.is_moe()) d += std::abs(std::log(static_cast<double>(m.moe.num_experts) / f.experts));
    if (d < best_d) best_d = d, best = &f;
  }
  return {best->name, best->flavor, "", false};
}

bool llama_like(const sim::ModelSpec& m) {
  return m.positional == sim::PositionalKind::rotary && m.norm_kind == sim::NormKind::rmsnorm &&
         m.ffn_kind == sim::FfnKind::swiglu && !m.parallel_residual && !m.mlp_bias && !m.out_proj_bias;
}

// selective_ac_option for full recompute of the first k blocks of each chunk: every N-th block.
struct LayerAc {
  int every = 1;
  bool exact = true;
};

LayerAc layer_ac(const formats::Plan& plan) {
  const auto counts = sim::layers_per_chunk(plan.model, plan.config);
  const int k = plan.config.recompute_num_layers;
  const bool uniform = std::all_of(counts.begin(), counts.end(), [&](int l) { return l == counts.front(); });
  const int chunk = counts.front();
  if (uniform && k > 0 && chunk % k == 0) return {chunk / k, true};
  double mean = 0;
  for (int l : counts) mean += l;
  mean /= static_cast<double>(counts.size());
  return {std::max(1, static_cast<int>(std::lround(mean / std::max(k, 1)))), false};
}

toml::table job_table(const formats::Plan& plan) {
  toml::table t;
  t.insert_or_assign(tf::dump_folder, "./outputs");
  t.insert_or_assign(tf::description, "shardplan plan: " + plan.model.name + " on " +
                                          std::to_string(plan.cluster.nodes) + " x " + plan.cluster.hardware.name);
  return t;
}

toml::table model_table(const formats::Plan& plan) {
  const ModelChoice mc = choose_flavor(plan.model);
  toml::table t;
  t.insert_or_assign(tf::model_name, str(mc.name));
  t.insert_or_assign(tf::model_flavor, str(mc.flavor));
  if (!mc.hf_assets_path.empty()) t.insert_or_assign(tf::hf_assets_path, str(mc.hf_assets_path));
  if (plan.config.uses_fp8()) t.insert_or_assign(tf::converters, toml::array{str(tf::converter_float8)});
  return t;
}

toml::table training_table(const formats::Plan& plan) {
  const auto& c = plan.config;
  const DpLayout d = dp_layout(c);
  toml::table t;
  const int local = c.pp > 1 ? c.global_batch_size / c.dp : c.micro_batch_size;
  t.insert_or_assign(tf::local_batch_size, local);
  t.insert_or_assign(tf::global_batch_size, c.global_batch_size);
  t.insert_or_assign(tf::seq_len, c.seq_len);
  t.insert_or_assign(tf::steps, tf::default_steps);
  t.insert_or_assign(tf::dataset, "c4");
  const bool bf16 = c.precision == sim::Precision::bf16;
  if (bf16 && !d.fsdp && (c.tp > 1 || c.pp > 1)) t.insert_or_assign(tf::dtype, str(tf::bfloat16));
  t.insert_or_assign(tf::mixed_precision_param, str(bf16 ? tf::bfloat16 : tf::float32));
  t.insert_or_assign(tf::mixed_precision_reduce, str(tf::float32));
  if (c.offload_optimizer) t.insert_or_assign(tf::enable_cpu_offload, true);
  return t;
}

std::string_view schedule_name(sim::PipelineSchedule s) {
  switch (s) {
    case sim::PipelineSchedule::gpipe:
      return tf::schedule_gpipe;
    case sim::PipelineSchedule::interleaved:
      return tf::schedule_interleaved;
    case sim::PipelineSchedule::zbv:
      return tf::schedule_zbv;
    case sim::PipelineSchedule::dualpipev:
      return tf::schedule_dualpipev;
    case sim::PipelineSchedule::dualpipe:
      throw sim::InputError(
          "pipeline schedule dualpipe: torch.distributed.pipelining runs DualPipe cut in half (DualPipeV, "
          "--schedule dualpipev), not the bidirectional one");
    case sim::PipelineSchedule::vhalf:
    case sim::PipelineSchedule::vmin:
      throw sim::InputError(std::string("pipeline schedule ") + sim::to_string(s) +
                            ": torch.distributed.pipelining has no memory-controlled V schedule (V-Half, V-Min)");
    case sim::PipelineSchedule::zb1p:
    case sim::PipelineSchedule::zb2p:
      throw sim::InputError(std::string("pipeline schedule ") + sim::to_string(s) +
                            ": torchtitan runs zero bubble with two stages per rank (ZBVZeroBubble), not one");
    case sim::PipelineSchedule::one_f_one_b:
      break;
  }
  return tf::schedule_1f1b;
}

// The modules of each (virtual) stage, in global stage order (chunk * pp + stage).
toml::array stage_modules(const formats::Plan& plan) {
  const auto counts = sim::layers_per_chunk(plan.model, plan.config);
  toml::array parts;
  int layer = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    toml::array part;
    if (s == 0) part.push_back(str(tf::fqn_embeddings));
    for (int i = 0; i < counts[s]; ++i) part.push_back(str(tf::fqn_layers) + std::to_string(layer++));
    if (s + 1 == counts.size()) {
      part.push_back(str(tf::fqn_norm));
      part.push_back(str(tf::fqn_output));
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

toml::table parallelism_table(const formats::Plan& plan) {
  const auto& c = plan.config;
  const DpLayout d = dp_layout(c);
  toml::table t;
  t.insert_or_assign(tf::dp_replicate, d.replicate);
  t.insert_or_assign(tf::dp_shard, d.shard);
  if (d.fsdp) t.insert_or_assign(tf::fsdp_reshard, str(d.reshard ? tf::reshard_always : tf::reshard_never));
  t.insert_or_assign(tf::tp, c.tp);
  if (c.tp_comm_overlap && c.tp > 1) t.insert_or_assign(tf::async_tp, true);
  t.insert_or_assign(tf::pp, c.pp);
  if (c.pp > 1) {
    t.insert_or_assign(tf::pp_schedule, str(schedule_name(c.schedule)));
    t.insert_or_assign(tf::pp_microbatch_size, c.micro_batch_size);
    // An even split of a model torchtitan has as a flavor: layers per (virtual) stage with the
    // embeddings and the output not counted as layers (pipeline_parallel.py:70-121, 236-344);
    // any other split as the modules of each stage.
    const ModelChoice mc = choose_flavor(plan.model);
    const tf::Flavor* flavor = tf::find_flavor(mc.name, mc.flavor);
    if (c.partition.empty() && mc.exact && flavor != nullptr && flavor->n_layers == plan.model.num_layers) {
      t.insert_or_assign(tf::pp_layers_per_stage, plan.model.num_layers / (c.pp * c.virtual_stages));
      t.insert_or_assign(tf::pp_first_less, 0);
      t.insert_or_assign(tf::pp_last_less, 0);
    } else {
      t.insert_or_assign(tf::pp_fqns, stage_modules(plan));
    }
  }
  t.insert_or_assign(tf::cp, c.cp);
  if (plan.model.is_moe()) {
    t.insert_or_assign(tf::ep, c.ep);
    t.insert_or_assign(tf::etp, c.ep > 1 ? c.expert_tp() : 1);
  }
  return t;
}

toml::table ac_table(const formats::Plan& plan) {
  const auto& c = plan.config;
  toml::table t;
  // Megatron's selective recompute drops only the s x s score tensors, which torchtitan's SDPA
  // never stores: it keeps what no recompute keeps (a note says so).
  if (c.recompute == sim::Recompute::none || c.recompute == sim::Recompute::selective) {
    t.insert_or_assign(tf::ac_mode, str(tf::ac_none));
  } else if (c.recompute == sim::Recompute::op_sac) {
    t.insert_or_assign(tf::ac_mode, str(tf::ac_selective));
    t.insert_or_assign(tf::ac_selective_option, str(tf::ac_option_op));
  } else if (c.recompute_every > 1) {
    t.insert_or_assign(tf::ac_mode, str(tf::ac_selective));
    t.insert_or_assign(tf::ac_selective_option, std::to_string(c.recompute_every));
  } else if (c.recompute_num_layers == 0) {
    t.insert_or_assign(tf::ac_mode, str(tf::ac_full));
  } else {
    t.insert_or_assign(tf::ac_mode, str(tf::ac_selective));
    t.insert_or_assign(tf::ac_selective_option, std::to_string(layer_ac(plan).every));
  }
  return t;
}

// [compile] on for fusion compile, and for async TP (which raises without it).
bool needs_compile(const sim::ParallelConfig& c) {
  return c.fusion == sim::Fusion::compile || (c.tp_comm_overlap && c.tp > 1);
}

// [quantize.linear.float8]: tensorwise = no recipe (the only one with FSDP float8 all-gather,
// float8.py:75-100); blockwise as per-row scales.
toml::table quantize_table(const sim::ParallelConfig& c, const DpLayout& d) {
  toml::table f;
  const bool rowwise = c.fp8 == sim::Fp8Recipe::blockwise;
  if (rowwise) f.insert_or_assign(tf::recipe_name, str(tf::recipe_rowwise));
  const bool gather = !rowwise && c.fp8_param_gather && d.shard > 1;
  f.insert_or_assign(tf::fsdp_float8_all_gather, gather);
  f.insert_or_assign(tf::precompute_float8_scale, gather);
  f.insert_or_assign(tf::filter_fqns, toml::array{str(tf::fqn_output)});
  toml::table linear;
  linear.insert_or_assign(tf::float8, std::move(f));
  toml::table q;
  q.insert_or_assign(tf::quantize_linear, std::move(linear));
  return q;
}

std::string header(const formats::Plan& plan) {
  std::ostringstream s;
  s << "# torchtitan " << tf::version << " job config (torchtitan/config/job_config.py at " << tf::version_commit
    << ")\n# written by shardplan for " << comment_text(plan.model.name) << " on " << plan.cluster.nodes << " x "
    << comment_text(plan.cluster.hardware.name) << " (" << plan.config.devices() << " devices).\n"
    << "# Run: torchrun ... -m " << tf::train_module << " " << tf::config_file_flag << " <this file>\n"
    << "# training.steps is torchtitan's default (" << tf::default_steps
    << ") and training.dataset \"c4\" (as in "
       "its shipped train_configs): set them for the run.\n";
  for (const auto& n : torchtitan_notes(plan)) s << "# shardplan note: " << comment_text(n) << "\n";
  return s.str();
}

void data_parallel_notes(const sim::ParallelConfig& c, std::vector<std::string>& n) {
  const DpLayout d = dp_layout(c);
  if (zero_group(c) == 1 && d.shard > 1)
    n.push_back("ZeRO-" + std::to_string(c.zero_stage) +
                " without sharding: torchtitan's DDP runs only without TP, "
                "PP and CP (llama3/infra/parallelize.py:148-151), so the config shards over the " +
                std::to_string(c.dp) +
                " data-parallel ranks with FSDP2 (reshard never: ZeRO-2's memory, less than planned)");
  else if (c.zero_stage == 1 && d.shard > 1)
    n.push_back(
        "ZeRO-1: torchtitan shards with FSDP2 only, so it runs as ZeRO-2 (fsdp_reshard_after_forward never: "
        "gradients are sharded too: less memory than planned, about the same collective volume)");
  if (c.cp > 1 && c.zero_stage == 0)
    n.push_back(
        "torchtitan always shards the weights over the cp ranks (FSDP2 over data_parallel_shard_degree x cp, "
        "parallel_dims.py build_mesh); the plan keeps them whole (ZeRO-0)");
  if (c.zero3_fetch == sim::Zero3Fetch::per_tensor_sync)
    n.push_back(
        "per-tensor synchronous ZeRO-3 gathers (DeepSpeed 0.3) are not torchtitan's: FSDP2 prefetches one "
        "block's parameters behind the previous block");
  if (c.rank_order != "tp-dp-pp" && c.rank_order != "tp-cp-dp-pp")
    n.push_back("rank order '" + comment_text(c.rank_order) +
                "' is not expressible: torchtitan's device mesh is "
                "pp, dp_replicate, dp_shard, cp, tp (tp fastest)");
}

void precision_notes(const sim::ParallelConfig& c, std::vector<std::string>& n) {
  if (c.precision != sim::Precision::bf16) return;
  const DpLayout d = dp_layout(c);
  if (!d.fsdp && (c.tp > 1 || c.pp > 1))
    n.push_back(
        "bf16 without FSDP: torchtitan applies no mixed precision with TP or PP unless FSDP/HSDP/CP is on "
        "(distributed/utils.py:251-256), so the config trains in pure bf16 (training.dtype bfloat16): no "
        "fp32 master weights, less optimizer memory than planned");
  else if (!d.fsdp && !c.casts_weights())
    n.push_back(
        "bf16 with DDP or one device: torchtitan runs torch.autocast over fp32 weights (distributed/utils.py:"
        "258-263), the plan's --mixed-precision autocast; it was planned with 16-bit weights and an fp32 master");
  else if (d.fsdp && c.casts_weights())
    n.push_back(
        "autocast: torchtitan's FSDP2 mixed precision gathers bf16 copies of the fp32 shards "
        "(MixedPrecisionPolicy param_dtype bfloat16, reduce_dtype float32), as --mixed-precision "
        "master_weights models it, not a cast per linear");
}

void pipeline_recompute_notes(const formats::Plan& plan, std::vector<std::string>& n) {
  const auto& c = plan.config;
  if (c.recompute == sim::Recompute::selective)
    n.push_back(
        "selective recompute (Megatron's attention-core recompute) has no torchtitan setting: exported as "
        "mode none, which keeps the same tensors under torchtitan's SDPA (no s x s scores to drop); its "
        "per-op policy is --recompute op_sac");
  if (c.recompute == sim::Recompute::full && c.recompute_num_layers > 0 && !layer_ac(plan).exact)
    n.push_back("full recompute of " + std::to_string(c.recompute_num_layers) +
                " blocks per chunk: torchtitan "
                "checkpoints every N-th block (selective_ac_option " +
                std::to_string(layer_ac(plan).every) + "), which does not give exactly that count here");
}

void layer_notes(const formats::Plan& plan, std::vector<std::string>& n) {
  const auto& c = plan.config;
  const auto& m = plan.model;
  if (c.tp > 1 && !c.sequence_parallel)
    n.push_back(
        "torchtitan's tensor parallelism is always sequence parallel (norms sharded over the sequence, "
        "llama3/infra/parallelize.py:217-241); the plan has no sequence parallelism");
  if (c.cp > 1 && c.cp_kind == sim::CpKind::all_to_all)
    n.push_back(
        "all_to_all (Ulysses) context parallelism: torchtitan runs ring attention (PyTorch context_parallel "
        "with head-tail load balancing) only");
  if (c.attention != sim::AttentionKind::flash)
    n.push_back(std::string(c.attention == sim::AttentionKind::eager ? "eager" : "flash1") +
                " attention: torchtitan's models run SDPA (fused flash kernels; the flavor's attn_type)");
  if (c.packed_document_tokens > 0)
    n.push_back(
        "packed documents: torchtitan masks documents only with a flex or varlen attention flavor (e.g. "
        "llama3 8B_varlen) and a packing dataset; the config keeps SDPA over whole sequences");
  if (c.fusion == sim::Fusion::megatron && sim::has_fusable_layers(m))
    n.push_back(
        "fusion megatron: torchtitan runs wq, wk, wv and w1, w3 as separate GEMMs and SwiGLU unfused "
        "(re-plan with --fusion eager for its time and memory)");
  if (needs_compile(c) && c.fusion != sim::Fusion::compile)
    n.push_back(
        "torch.compile is on ([compile]; async TP needs it): it fuses pointwise kernels beyond the plan's "
        "(re-plan with --fusion compile for its time and memory)");
  if (c.uses_fp8() && !needs_compile(c))
    n.push_back(
        "float8 without torch.compile: its casts and scaling run as separate kernels (torchtitan "
        "recommends [compile] with float8; re-plan with --fusion compile)");
  if (m.is_moe() && c.moe_capacity_factor > 0)
    n.push_back("torchtitan's MoE is dropless: the plan's capacity factor is not expressible");
  if (m.is_moe() && c.ep == 1 && c.expert_tp() != c.tp)
    n.push_back("expert tensor parallel " + std::to_string(c.expert_tp()) +
                " with ep 1: torchtitan splits the "
                "experts over tp (" +
                std::to_string(c.tp) + ")");
  if (c.offload_optimizer)
    n.push_back(
        "optimizer offload: training.enable_cpu_offload is FSDP2's CPUOffloadPolicy: parameters and "
        "gradients live on the host too, and the optimizer steps there");
}

void fp8_notes(const sim::ParallelConfig& c, bool moe, std::vector<std::string>& n) {
  if (!c.uses_fp8()) return;
  if (c.fp8 == sim::Fp8Recipe::delayed)
    n.push_back(
        "delayed FP8 scaling: torchao's Float8Linear (torchtitan quantize.linear.float8) has no amax history; "
        "the config runs tensorwise (current) scaling");
  if (c.fp8 == sim::Fp8Recipe::blockwise)
    n.push_back("blockwise FP8: torchtitan " + str(tf::version) +
                " scales per row (recipe_name rowwise), not per "
                "1x128 block; MXFP8 (quantize.linear.mx, 1x32 blocks) needs SM100 devices");
  if (c.fp8_param_gather && c.fp8 == sim::Fp8Recipe::blockwise)
    n.push_back(
        "FP8 parameter all-gather needs tensorwise scaling in torchtitan (float8.py:65-69): the weights "
        "gather in bf16");
  else if (c.fp8_param_gather && dp_layout(c).shard <= 1)
    n.push_back(
        "FP8 parameter all-gather needs data_parallel_shard_degree > 1 in torchtitan: without it the "
        "weights are not gathered at all");
  if (moe)
    n.push_back("the routed experts' grouped GEMMs stay bf16 (quantize.grouped_mm.float8 is a torchtitan prototype)");
}

}  // namespace

std::vector<std::string> torchtitan_notes(const formats::Plan& plan) {
  check_runnable(plan);
  std::vector<std::string> n;
  n.push_back("written for torchtitan " + str(tf::version) + " (" + str(tf::version_commit).substr(0, 8) +
              "), the last release with TOML job configs; torchtitan after " + str(tf::toml_removed_commit) +
              " takes `-m torchtitan.train --module <model> --config <recipe>` with --parallelism.* and --training.* "
              "overrides instead (local_batch_size, global_batch_size and seq_len became token counts and "
              "max_context_length; flavor and float8 live in the Python recipe)");
  const ModelChoice mc = choose_flavor(plan.model);
  if (!mc.exact)
    n.push_back("model '" + comment_text(plan.model.name) + "' is no torchtitan " + str(tf::version) +
                " flavor: the config names the nearest, " + str(mc.name) + " \"" + str(mc.flavor) + "\"" +
                (llama_like(plan.model) ? "" : " (a RoPE/RMSNorm/SwiGLU decoder, unlike this model)") +
                "; register the plan's shapes as a flavor of a TrainSpec and name it in [model]");
  data_parallel_notes(plan.config, n);
  precision_notes(plan.config, n);
  pipeline_recompute_notes(plan, n);
  layer_notes(plan, n);
  fp8_notes(plan.config, plan.model.is_moe(), n);
  return n;
}

std::string torchtitan_toml(const formats::Plan& plan) {
  check_runnable(plan);
  const auto& c = plan.config;
  toml::table root;
  root.insert_or_assign(tf::job, job_table(plan));
  root.insert_or_assign(tf::model, model_table(plan));
  root.insert_or_assign(tf::training, training_table(plan));
  root.insert_or_assign(tf::parallelism, parallelism_table(plan));
  root.insert_or_assign(tf::activation_checkpoint, ac_table(plan));
  if (needs_compile(c)) {
    toml::table t;
    t.insert_or_assign(tf::compile_enable, true);
    t.insert_or_assign(tf::compile_components, toml::array{str(tf::compile_model), str(tf::compile_loss)});
    root.insert_or_assign(tf::compile, std::move(t));
  }
  if (c.uses_fp8()) root.insert_or_assign(tf::quantize, quantize_table(c, dp_layout(c)));
  // Double-quoted basic strings (as torchtitan's own train_configs), escapes for control characters.
  const auto flags = toml::format_flags::allow_unicode_strings | toml::format_flags::indentation;
  std::ostringstream s;
  s << header(plan) << "\n" << toml::toml_formatter(root, flags) << "\n";
  return s.str();
}

std::string torchtitan_command_line(const formats::Plan& plan, const std::string& config_path) {
  check_runnable(plan);
  const int nodes = plan.cluster.nodes, per_node = plan.cluster.per_node();
  std::vector<std::string> words = {
      "torchrun",       "--nnodes", std::to_string(nodes), "--nproc_per_node", std::to_string(per_node),
      "--rdzv_backend", "c10d"};
  std::ostringstream s;
  if (nodes == 1) {  // run_train.sh
    for (const char* w :
         {"--rdzv_endpoint", "localhost:0", "--local-ranks-filter", "0", "--role", "rank", "--tee", "3"})
      words.emplace_back(w);
    s << tf::alloc_conf_env << " " << formats::shell_join(words);
  } else {  // multinode_trainer.slurm: the same line on every node, rendezvous at the first
    s << "# on each of the " << nodes << " nodes (srun or one shell each), MASTER_ADDR = the first node's address\n"
      << tf::alloc_conf_env << " " << formats::shell_join(words) << " --rdzv_id 101"
      << " --rdzv_endpoint \"${MASTER_ADDR:?set MASTER_ADDR to the address of the first node}:29500\"";
  }
  s << " -m " << tf::train_module << " " << tf::config_file_flag << " " << shell_quote(config_path) << "\n";
  return s.str();
}

}  // namespace shardplan::interop
