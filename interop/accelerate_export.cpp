// Hugging Face Accelerate with FSDP from a Plan: the config YAML `accelerate config` writes (keys
// sorted, as its yaml.safe_dump writes them), the notes on what the YAML cannot carry (also its
// leading comments), and the `accelerate launch` line. Names and line citations:
// accelerate_flags.hpp (huggingface/accelerate 16cb6eb8, 2026-07-24).
//
// FSDP version: 2 (FSDP2, fully_shard) unless the plan is ZeRO 0 without tp/cp, which needs FSDP1's
// NO_SHARD. FSDP2 is what `accelerate config` offers by default (CL:400-405, default index 1 = 2),
// the only version that takes parallelism_config (tp, cp, HSDP of any group size; LA:1205-1206),
// and the one where LoRA's frozen and trainable parameters in one wrapped layer "work out of the
// box" (docs/source/concept_guides/fsdp1_vs_fsdp2.md). Under FSDP1 both fsdp_sharding_strategy and
// fsdp_reshard_after_forward are written with the same value, since `accelerate launch` passes
// the former (default FULL_SHARD) and it overrides the latter (UL:313, DC:1836-1845, AC:1940).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "accelerate.hpp"
#include "accelerate_flags.hpp"
#include "formats/shell_quote.hpp"
#include "launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace af = accelerate_flags;
using formats::comment_text;
using formats::Plan;
using formats::shell_quote;

namespace {

// --- the YAML tree: scalars typed as Accelerate reads them, mappings emitted with sorted keys ---

struct Item {
  enum class Kind { boolean, integer, text, mapping } kind = Kind::text;
  bool b = false;
  long long i = 0;
  std::string s;
  // A mapping's entries, keys[i] -> values[i] (two vectors: a pair of a std::string and the
  // incomplete Item is refused by clang with libstdc++; a vector of an incomplete type is fine).
  std::vector<std::string> keys;
  std::vector<Item> values;

  static Item of(bool v) {
    Item x;
    x.kind = Kind::boolean;
    x.b = v;
    return x;
  }
  static Item of(long long v) {
    Item x;
    x.kind = Kind::integer;
    x.i = v;
    return x;
  }
  static Item of(int v) { return of(static_cast<long long>(v)); }
  static Item of(const char*) = delete;  // would pick of(bool): pass a std::string_view
  static Item of(std::string_view v) {
    Item x;
    x.kind = Kind::text;
    x.s = std::string(v);
    return x;
  }
  static Item map() {
    Item x;
    x.kind = Kind::mapping;
    return x;
  }
  Item& set(std::string_view key, Item v) {
    keys.emplace_back(key);
    values.push_back(std::move(v));
    return *this;
  }
};

// Whether PyYAML (YAML 1.1, what Accelerate loads with) would read the plain scalar `s` as
// something other than a string (a bool such as no/off, null, a number): such strings are quoted,
// as safe_dump quotes them (downcast_bf16: 'no').
bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  std::string lower;
  for (char ch : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* word : {"yes", "no", "true", "false", "on", "off", "null", "y", "n"})
    if (lower == word) return true;
  const char first = s.front();
  return std::isdigit(static_cast<unsigned char>(first)) != 0 ||
         std::string_view("-+.~=<!&*?|>'\"%@`").find(first) != std::string_view::npos;
}

void emit(YAML::Emitter& out, const Item& item) {
  switch (item.kind) {
    case Item::Kind::boolean:
      out << item.b;
      break;
    case Item::Kind::integer:
      out << item.i;
      break;
    case Item::Kind::text:
      if (needs_quotes(item.s)) out << YAML::SingleQuoted;
      out << item.s;
      break;
    case Item::Kind::mapping: {
      std::vector<std::size_t> order(item.keys.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return item.keys[a] < item.keys[b]; });
      out << YAML::BeginMap;
      for (const std::size_t i : order) {
        out << YAML::Key << item.keys[i] << YAML::Value;
        emit(out, item.values[i]);
      }
      out << YAML::EndMap;
      break;
    }
  }
}

// --- what Accelerate + FSDP runs for the plan ---

[[noreturn]] void refuse(const std::string& what) {
  throw sim::InputError("Accelerate + FSDP cannot run this plan: " + what);
}

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string n(long long v) { return std::to_string(v); }

// InputError for what Accelerate with FSDP cannot run at all.
void check_runnable(const Plan& plan) {
  const auto& c = plan.config;
  if (c.pp > 1)
    refuse("pipeline parallelism (pp " + n(c.pp) + "): Accelerate's FSDP has no pipeline stages; re-plan with pp 1");
  if (c.ep > 1)
    refuse("expert parallelism (ep " + n(c.ep) +
           "): Accelerate's FSDP shards the experts like dense weights and "
           "has no expert-parallel group; re-plan with ep 1");
  if (plan.model.is_moe() && c.expert_tp() != c.tp)
    refuse("expert tensor parallelism (etp " + n(c.expert_tp()) + " != tp " + n(c.tp) + ") has no Accelerate setting");
  const std::string device = upper(plan.cluster.hardware.device.name + " " + plan.cluster.hardware.name);
  if (device.find("TRAINIUM") != std::string::npos || device.find("NEURON") != std::string::npos ||
      upper(plan.cluster.hardware.name).rfind("TRN", 0) == 0)
    refuse("FSDP is not supported on Neuron devices (`accelerate config` refuses it, cluster.py:396)");
  if (c.cp > 1 && c.cp_kind == sim::CpKind::all_to_all)
    refuse(
        "Ulysses context parallelism (cp kind all_to_all): Accelerate runs it only with DeepSpeed "
        "(parallelism_config sp_size, sp_backend deepspeed); re-plan with cp kind ring");
  if (c.cp > 1 && c.attention != sim::AttentionKind::flash)
    refuse(std::string("context parallelism with attention ") + sim::to_string(c.attention) +
           ": Accelerate's context parallelism runs only SDPA (context_parallelism.md); re-plan with attention flash");
  if (c.zero_stage == 0 && (c.tp > 1 || c.cp > 1) && c.dense_replicas() > 1)
    refuse(
        "ZeRO 0 with tp/cp > 1: parallelism_config composes tensor/context parallelism only with FSDP sharding "
        "(dp_shard_size > 1, parallelism_config.py:337-341; FSDP2 shards over dp_shard x cp); re-plan with "
        "ZeRO 2 or 3");
  if (c.zero_stage >= 1 && c.shard_group() == 1 && c.dp > 1)
    refuse("a sharding group of 1 over dp " + n(c.dp) +
           ": FSDP2's HSDP needs dp_shard_size > 1 "
           "(parallelism_config.py:61-66); re-plan with ZeRO 0 (NO_SHARD) or a larger sharding degree");
  // fsdp_activation_checkpointing wraps every decoder layer.
  if (const std::string why = torchtitan_only_recompute(c, false); !why.empty()) refuse(why);
}

struct Layout {
  int version = 2;
  bool reshard = true;        // FSDP2 reshard_after_forward
  std::string_view strategy;  // FSDP1 sharding strategy (and the FSDP1 name of the FSDP2 choice)
  bool parallelism = false;   // a parallelism_config is written
  int dp_replicate = 1, dp_shard = 1;
};

Layout layout_of(const Plan& plan) {
  const auto& c = plan.config;
  Layout l;
  if (c.zero_stage == 0 && c.tp == 1 && c.cp == 1) {
    l.version = 1;
    l.strategy = af::no_shard;
    return l;
  }
  const bool hsdp = c.zero_stage >= 1 && c.shard_group() < c.dp;
  l.reshard = c.zero_stage == 3;
  l.strategy =
      hsdp ? (l.reshard ? af::hybrid_shard : af::hybrid_shard_zero2) : (l.reshard ? af::full_shard : af::shard_grad_op);
  l.parallelism = c.tp > 1 || c.cp > 1 || hsdp;
  l.dp_shard = c.zero_stage >= 1 ? c.shard_group() : c.dp;
  l.dp_replicate = c.dp / l.dp_shard;
  return l;
}

// The transformers decoder-layer class of the model (empty when not known): by name first (the
// cards of Mistral and Qwen use family "llama" for their module naming), then by family.
std::string_view layer_class(const sim::ModelSpec& m) {
  std::string name;
  for (char ch : m.name) name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("mixtral")) return af::cls_mixtral;
  if (has("mistral")) return m.is_moe() ? std::string_view() : af::cls_mistral;
  if (has("qwen3")) return m.is_moe() ? af::cls_qwen3_moe : af::cls_qwen3;
  if (has("qwen2") || has("qwen1.5")) return m.is_moe() ? af::cls_qwen2_moe : af::cls_qwen2;
  if (has("deepseek") && (has("v3") || has("r1"))) return af::cls_deepseek_v3;
  if (m.family == "mixtral") return af::cls_mixtral;
  if (m.family == "llama") return m.is_moe() ? std::string_view() : af::cls_llama;
  if (m.family == "gpt2") return af::cls_gpt2;
  if (m.family == "gptj") return af::cls_gptj;
  if (m.family == "gpt_neox") return af::cls_gpt_neox;
  if (m.family == "bert") return af::cls_bert;
  return {};
}

// FP8 through Accelerate's recipes: delayed -> Transformer Engine (DelayedScaling), tensorwise ->
// torchao Float8Linear (its default recipe); blockwise has none (empty).
std::string_view fp8_backend(const sim::ParallelConfig& c) {
  if (c.fp8 == sim::Fp8Recipe::delayed) return af::fp8_backend_te;
  if (c.fp8 == sim::Fp8Recipe::tensorwise) return af::fp8_backend_ao;
  return {};
}

std::string_view mixed_precision_of(const sim::ParallelConfig& c) {
  if (!fp8_backend(c).empty()) return af::precision_fp8;
  if (c.precision == sim::Precision::bf16) return af::precision_bf16;
  if (c.precision == sim::Precision::fp16) return af::precision_fp16;
  return af::precision_no;
}

std::string join_quoted(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& t : v) s += (s.empty() ? "\"" : ", \"") + t + "\"";
  return s;
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

namespace {

void sharding_notes(const Plan& plan, const Layout& l, std::vector<std::string>& out) {
  const auto& c = plan.config;
  if (c.zero_stage == 1)
    out.push_back(
        "ZeRO-1 (optimizer states sharded, gradients all-reduced) has no FSDP strategy: "
        "fsdp_reshard_after_forward false is ZeRO-2 (FSDP1's SHARD_GRAD_OP), which shards the gradients "
        "too (a reduce-scatter in place of the all-reduce)");
  if (c.zero_stage == 0 && l.version == 2)
    out.push_back("ZeRO 0 on one data-parallel replica: FSDP2 shards over a group of 1, so nothing is sharded");
  if (l.version == 1)
    out.push_back(
        "fsdp_version 1: fsdp_sharding_strategy is written beside fsdp_reshard_after_forward because "
        "accelerate launch passes fsdp_sharding_strategy (default FULL_SHARD) and FSDP1 prefers it "
        "(utils/launch.py:313, accelerator.py:1940)");
  if (c.zero3_fetch == sim::Zero3Fetch::per_tensor_sync && c.zero_stage == 3)
    out.push_back(
        "per-tensor synchronous ZeRO-3 fetch (DeepSpeed 0.3.x) is not what FSDP does: it gathers one "
        "decoder layer at a time with the next one prefetched");
  if (c.offload_optimizer)
    out.push_back(
        "fsdp_offload_params moves the parameters and gradients to the CPU as well and runs the "
        "optimizer step there (CPUOffloadPolicy); the plan offloads only the optimizer states");
  if (c.offload_activations)
    out.push_back(
        "activation offload has no Accelerate setting: wrap the forward in "
        "torch.autograd.graph.save_on_cpu() in the training script");
  if (c.recompute == sim::Recompute::selective)
    out.push_back(
        "selective recompute (Megatron's attention-core recompute) has no Accelerate setting: "
        "fsdp_activation_checkpointing stays false");
  if (c.recompute == sim::Recompute::full && c.recompute_num_layers > 0)
    out.push_back(
        "fsdp_activation_checkpointing checkpoints every decoder layer; the plan recomputes only the "
        "first " +
        n(c.recompute_num_layers) + " of each model chunk");
  if (c.fp32_grad_accum() && sim::fp32_grad_accum_applies(c))
    out.push_back(
        "fp32 gradient accumulation has no Accelerate setting: FSDP accumulates gradients in the "
        "sharded parameters' dtype (fp32 when the model is loaded in fp32)");
}

void parallel_notes(const Plan& plan, std::vector<std::string>& out) {
  const auto& c = plan.config;
  if (c.tp > 1)
    out.push_back(
        "tensor parallelism: load the model with from_pretrained(..., tp_plan=\"auto\") (transformers "
        ">= 4.52); Accelerate checks its tp size against parallelism_config_tp_size (accelerator.py:1901)");
  if (c.sequence_parallel)
    out.push_back(
        "sequence parallelism has no Accelerate setting: transformers' tp_plan decides how the "
        "activations between the tensor-parallel regions are split");
  if (c.tp_comm_overlap)
    out.push_back(
        "tp_comm_overlap: Accelerate does not run async tensor parallelism (TorchTensorParallelConfig "
        "ignores enable_async_tp, dataclasses.py:2313)");
  if (c.cp > 1)
    out.push_back(
        "context parallelism: load the model with attn_implementation=\"sdpa\", a causal (or no) mask, "
        "and run each step inside accelerator.maybe_context_parallel(buffers=[input_ids, labels, ...], "
        "buffer_seq_dims=[1, 1, ...]) (accelerator.py:4111); parallelism_config_cp_comm_strategy "
        "alltoall is the ring rotation the plan models (Accelerate's default, allgather, gathers all K/V)");
  if (plan.model.is_moe() && c.moe_capacity_factor > 0)
    out.push_back("expert capacity factor " + number(c.moe_capacity_factor) +
                  ": transformers' MoE blocks are dropless (every token reaches its top-k experts)");
  if (c.fusion == sim::Fusion::megatron && sim::has_fusable_layers(plan.model))
    out.push_back(
        "the plan times Megatron-Core's fused layers; transformers runs one GEMM per projection "
        "(re-plan with fusion eager for its cost)");
  if (c.fusion == sim::Fusion::compile)
    out.push_back(
        "the plan times torch.compile'd blocks; this config leaves the Trainer eager (set "
        "TrainingArguments torch_compile, or re-plan with fusion eager)");
  if (c.packed_document_tokens > 0)
    out.push_back("packed sequences (documents of " + n(c.packed_document_tokens) +
                  " tokens): pack with transformers' DataCollatorWithFlattening and "
                  "attn_implementation=\"flash_attention_2\" (position_ids mark the documents)");
  if (layer_class(plan.model).empty())
    out.push_back("no transformers decoder-layer class is known for model '" + plan.model.name + "' (family '" +
                  plan.model.family +
                  "'): fsdp_transformer_layer_cls_to_wrap is left out, so Accelerate wraps the "
                  "model's _no_split_modules (dataclasses.py:2068-2073)");
}

void precision_notes(const Plan& plan, std::vector<std::string>& out) {
  const auto& c = plan.config;
  if (c.casts_weights())
    out.push_back(
        "the plan keeps fp32 weights cast at each linear (autocast); Accelerate's FSDP mixed precision "
        "keeps the fp32 shards but gathers 16-bit copies (param_dtype, dataclasses.py:2092-2126), as the "
        "plan's master_weights recipe does");
  else if (c.precision != sim::Precision::fp32 && c.lora.enabled() && !c.lora.quantized_base())
    out.push_back(std::string("load the base model in 16-bit (torch_dtype=torch.") +
                  (c.precision == sim::Precision::fp16 ? "float16" : "bfloat16") +
                  "): the plan keeps the frozen base weights in 16-bit; PEFT keeps the adapter weights in fp32 "
                  "(get_peft_model's autocast_adapter_dtype=True) as their master copy");
  else if (c.precision != sim::Precision::fp32 && !c.lora.enabled())
    out.push_back(
        "load the model in fp32 (torch_dtype=torch.float32): FSDP keeps the fp32 shards as the master "
        "copy and gathers 16-bit weights for compute (mixed_precision " +
        std::string(mixed_precision_of(c)) + ")");
  if (c.uses_fp8() && fp8_backend(c).empty())
    out.push_back(std::string("FP8 ") + sim::to_string(c.fp8) +
                  " scaling has no Accelerate recipe (Transformer Engine's use_mxfp8_block_scaling is MXFP8, 1x32 "
                  "blocks): the config runs mixed_precision " +
                  std::string(mixed_precision_of(c)) +
                  "; wrap the blocks' linears in te.fp8_autocast(fp8_recipe=Float8BlockScaling()) in the model code");
  if (!fp8_backend(c).empty() && c.precision != sim::Precision::bf16)
    out.push_back(std::string("mixed_precision fp8 runs everything outside the FP8 GEMMs in bf16 "
                              "(dataclasses.py:2095); the plan's precision is ") +
                  sim::to_string(c.precision));
  if (c.fp8_param_gather && fp8_backend(c) != af::fp8_backend_ao)
    out.push_back(
        "FP8 parameter all-gather: only torchao (fp8 backend AO, tensorwise) gathers FP8 weights under "
        "FSDP2 (enable_fsdp_float8_all_gather); this config gathers 16-bit weights");
  if (c.lora.enabled())
    out.push_back("LoRA comes from the training script: get_peft_model(model, peft.LoraConfig(r=" + n(c.lora.rank) +
                  ", lora_alpha=" + number(c.lora.alpha) + ", lora_dropout=" + number(c.lora.dropout) +
                  ", target_modules=[" + join_quoted(c.lora.targets) +
                  "])) before accelerator.prepare(); the "
                  "config has no LoRA setting");
  if (c.lora.quantized_base())
    out.push_back(
        "QLoRA: load the base with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", "
        "bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16, "
        "bnb_4bit_quant_storage=torch.bfloat16) so FSDP can shard the 4-bit weights");
  if (c.attention == sim::AttentionKind::eager)
    out.push_back(
        "attention kind eager (explicit softmax, s x s scores stored) is the model's setting: load it "
        "with attn_implementation=\"eager\"");
  else
    out.push_back(std::string("attention kind ") + sim::to_string(c.attention) +
                  " is the model's setting: load it with attn_implementation=\"sdpa\" or \"flash_attention_2\"" +
                  (c.attention == sim::AttentionKind::flash1
                       ? " (the plan times first-generation kernels, which transformers does not ship)"
                       : ""));
  out.push_back("micro-batch " + n(c.micro_batch_size) + " per device, gradient accumulation " + n(c.micro_batches()) +
                " (global batch " + n(c.global_batch_size) + ") and sequence length " + n(c.seq_len) +
                " live in the training script (DataLoader batch_size, "
                "Accelerator(gradient_accumulation_steps=" +
                n(c.micro_batches()) +
                ")); the config has no batch "
                "settings");
}

Item fsdp_section(const Plan& plan, const Layout& l) {
  const auto& c = plan.config;
  Item f = Item::map();
  f.set(af::fsdp_version, Item::of(l.version));
  f.set(af::fsdp_activation_checkpointing, Item::of(c.recompute == sim::Recompute::full));
  f.set(af::fsdp_auto_wrap_policy, Item::of(af::transformer_based_wrap));
  const std::string_view cls = layer_class(plan.model);
  if (!cls.empty()) f.set(af::fsdp_transformer_layer_cls_to_wrap, Item::of(cls));
  // torchao FP8 with FSDP and cpu_ram_efficient_loading is refused (accelerator.py:517-525).
  f.set(af::fsdp_cpu_ram_efficient_loading, Item::of(fp8_backend(c) != af::fp8_backend_ao));
  f.set(af::fsdp_offload_params, Item::of(c.offload_optimizer));
  f.set(af::fsdp_state_dict_type, Item::of(af::sharded_state_dict));
  if (l.version == 2) {
    f.set(af::fsdp_reshard_after_forward, Item::of(l.reshard));
  } else {
    f.set(af::fsdp_reshard_after_forward, Item::of(l.strategy));
    f.set(af::fsdp_sharding_strategy, Item::of(l.strategy));
    f.set(af::fsdp_backward_prefetch, Item::of(af::backward_pre));
    f.set(af::fsdp_forward_prefetch, Item::of(false));
    // Frozen and trainable parameters in one FlatParameter (LoRA) need it (launch.py:578-583).
    f.set(af::fsdp_use_orig_params, Item::of(true));
    // Forced true with cpu_ram_efficient_loading (cluster.py:495-496; utils/launch.py:306-307).
    f.set(af::fsdp_sync_module_states, Item::of(true));
  }
  return f;
}

Item parallelism_section(const sim::ParallelConfig& c, const Layout& l) {
  Item p = Item::map();
  p.set(af::pc_dp_replicate, Item::of(l.dp_replicate));
  p.set(af::pc_dp_shard, Item::of(l.dp_shard));
  p.set(af::pc_tp, Item::of(c.tp));
  p.set(af::pc_cp, Item::of(c.cp));
  // Ring attention (K/V passed to the neighbour cp - 1 times) is Accelerate's "alltoall" rotation.
  if (c.cp > 1) p.set(af::pc_cp_comm_strategy, Item::of(af::cp_alltoall));
  return p;
}

Item fp8_section(const sim::ParallelConfig& c) {
  Item f = Item::map();
  f.set(af::fp8_backend, Item::of(fp8_backend(c)));
  if (fp8_backend(c) == af::fp8_backend_te) {
    // TE's DelayedScaling defaults (Accelerate's own default algorithm is most_recent).
    f.set(af::fp8_format, Item::of(af::fp8_format_hybrid));
    f.set(af::fp8_amax_history_len, Item::of(1024));
    f.set(af::fp8_amax_compute_algo, Item::of(std::string_view("max")));
  } else {
    f.set(af::fp8_enable_fsdp_float8_all_gather, Item::of(c.fp8_param_gather));
  }
  return f;
}

std::string header(const Plan& plan, const Layout& l) {
  const auto& c = plan.config;
  std::ostringstream s;
  s << "# Accelerate config (accelerate launch --config_file ...) generated by shardplan"
    << (plan.shardplan_version.empty() ? "" : " " + plan.shardplan_version) << "\n";
  s << "# "
    << comment_text(plan.model.name + " on " + n(plan.cluster.nodes) + " x " + plan.cluster.hardware.name + ": tp " +
                    n(c.tp) + ", cp " + n(c.cp) + ", dp " + n(c.dp) + ", ZeRO " + n(c.zero_stage) +
                    (c.zero_stage > 0 ? ", sharding group " + n(c.shard_group()) : std::string()) + ", seq_len " +
                    n(c.seq_len))
    << "\n";
  if (l.version == 2)
    s << "# fsdp_version 2 (torch >= 2.6): fsdp_reshard_after_forward " << (l.reshard ? "true" : "false")
      << (l.dp_replicate > 1 ? " with dp_replicate_size > 1" : "") << " is FSDP1's " << l.strategy << "\n";
  for (const auto& note : accelerate_notes(plan)) s << "# shardplan note: " << comment_text(note) << "\n";
  return s.str();
}

}  // namespace

std::vector<std::string> accelerate_notes(const Plan& plan) {
  check_runnable(plan);
  const Layout l = layout_of(plan);
  std::vector<std::string> out;
  sharding_notes(plan, l, out);
  parallel_notes(plan, out);
  precision_notes(plan, out);
  return out;
}

std::string accelerate_yaml(const Plan& plan) {
  check_runnable(plan);
  const auto& c = plan.config;
  const Layout l = layout_of(plan);
  Item root = Item::map();
  root.set(af::compute_environment, Item::of(af::local_machine));
  root.set(af::distributed_type, Item::of(af::type_fsdp));
  root.set(af::num_machines, Item::of(plan.cluster.nodes));
  root.set(af::num_processes, Item::of(plan.cluster.devices()));  // the total (utils/launch.py:113, 217)
  root.set(af::machine_rank, Item::of(0));
  root.set(af::main_training_function, Item::of(std::string_view("main")));
  root.set(af::mixed_precision, Item::of(mixed_precision_of(c)));
  root.set(af::rdzv_backend, Item::of(af::rdzv_static));
  root.set(af::same_network, Item::of(true));
  root.set(af::use_cpu, Item::of(false));
  root.set(af::fsdp_config, fsdp_section(plan, l));
  if (l.parallelism) root.set(af::parallelism_config, parallelism_section(c, l));
  if (!fp8_backend(c).empty()) root.set(af::fp8_config, fp8_section(c));
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, root);
  return header(plan, l) + out.c_str() + "\n";
}

std::string accelerate_command_line(const Plan& plan, const std::string& config_path, const std::string& script) {
  check_runnable(plan);
  if (config_path.empty()) throw sim::InputError("accelerate launch: the config file path is empty");
  if (script.empty()) throw sim::InputError("accelerate launch: the training script path is empty");
  std::string s = "accelerate " + std::string(af::launch) + " " + std::string(af::flag_config_file) + " " +
                  shell_quote(config_path);
  if (plan.cluster.nodes > 1) s += " " + std::string(af::flag_num_machines) + " " + n(plan.cluster.nodes);
  s += " " + std::string(af::flag_num_processes) + " " + n(plan.cluster.devices());
  if (plan.cluster.nodes > 1)
    // Expanded on each node by the shell that runs the line: double quotes on purpose.
    s += " " + std::string(af::flag_machine_rank) + " \"$MACHINE_RANK\" " + std::string(af::flag_main_process_ip) +
         " \"$MAIN_PROCESS_IP\" " + std::string(af::flag_main_process_port) + " " + n(af::default_main_process_port);
  return s + " " + shell_quote(script);
}

}  // namespace shardplan::interop
