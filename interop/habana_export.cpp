// Optimum-Habana (Gaudi) from a Plan: the `gaudi_spawn.py --use_deepspeed ... run_lora_clm.py` (LoRA)
// or `... run_clm.py` (full training) command of examples/language-modeling, after the README's
// Llama-2-70B LoRA example, and its DeepSpeed JSON in the form of llama2_ds_zero3_config.json.
// Names and sources in habana_flags.hpp (huggingface/optimum-habana 1d8504c).
//
// Quoting: gaudi_spawn.py re-joins the script's arguments into one string for /bin/bash (see
// habana_flags.hpp), so each argument taken from the plan or the caller is written for two shells:
// plain words ([A-Za-z0-9_@%+:,./=-]) as they are, anything else in double quotes with \ " $ `
// escaped (which gaudi_spawn leaves alone, as it starts with a double quote), the whole then
// shell_quote()d for the outer shell. A multi-node run goes through DeepSpeed's pdsh runner, which
// re-joins the arguments once more (multinode_runner.py PDSHRunner.parse_user_args): there only
// plain words are accepted.
//
// Batch sizes in the JSON stay "auto", as in the example: the Hugging Face DeepSpeed integration
// fills them from the command (train_batch_size = world x micro x accumulation, which the Gaudi
// trainer divides by the context-parallel size), so the two files cannot disagree.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "habana.hpp"
#include "habana_flags.hpp"
#include "launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace hf = habana_flags;
using formats::comment_text;
using formats::shell_quote;
using nlohmann::json;

namespace {

// Hugging Face ids of shardplan's model cards (each card's "source", models/*.json).
struct HubId {
  std::string_view card, id;
};
constexpr HubId kHubIds[] = {
    {"llama2-7b", "meta-llama/Llama-2-7b-hf"},
    {"llama2-13b", "meta-llama/Llama-2-13b-hf"},
    {"llama2-70b", "meta-llama/Llama-2-70b-hf"},
    {"llama3.1-8b", "meta-llama/Llama-3.1-8B"},
    {"llama3.1-70b", "meta-llama/Llama-3.1-70B"},
    {"llama3.1-405b", "meta-llama/Llama-3.1-405B"},
    {"mistral-7b", "mistralai/Mistral-7B-v0.1"},
    {"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"},
    {"qwen3-8b", "Qwen/Qwen3-8B"},
    {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"},
    {"tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"},
    {"gpt2", "openai-community/gpt2"},
    {"gpt2-xl", "openai-community/gpt2-xl"},
    {"gpt-j-6b", "EleutherAI/gpt-j-6b"},
    {"gpt-neox-20b", "EleutherAI/gpt-neox-20b"},
    {"deepseek-v3", "deepseek-ai/DeepSeek-V3"},
};

std::string hub_id(const sim::ModelSpec& m) {
  for (const auto& h : kHubIds)
    if (h.card == m.name) return std::string(h.id);
  return "";
}

[[noreturn]] void refuse(const formats::Plan& plan, const std::string& why) {
  throw sim::InputError("Optimum-Habana export of " + plan.model.name + ": " + why);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool multi_node(const formats::Plan& plan) { return plan.cluster.nodes > 1; }

void check_runnable(const formats::Plan& plan) {
  const auto& c = plan.config;
  const auto& hw = plan.cluster.hardware;
  if (lower(hw.name + " " + hw.description).find("gaudi") == std::string::npos)
    refuse(plan, "hardware '" + hw.name + "' is not Intel Gaudi (its name or description names no Gaudi)");
  if (c.tp > 1 || c.pp > 1 || c.ep > 1)
    refuse(plan, "tensor (" + std::to_string(c.tp) + "), pipeline (" + std::to_string(c.pp) + ") or expert (" +
                     std::to_string(c.ep) +
                     ") parallelism: the DeepSpeed path of the language-modeling examples "
                     "has none (data parallelism with ZeRO, and DeepSpeed-Ulysses context parallelism)");
  if (c.cp > 1 && c.cp_kind != sim::CpKind::all_to_all)
    refuse(plan, "ring context parallelism: " + std::string(hf::kContextParallel) +
                     " runs DeepSpeed-Ulysses (all-to-all); re-plan with --cp-kind all_to_all");
  if (c.precision == sim::Precision::fp16)
    refuse(plan, "fp16: GaudiTrainingArguments refuses --fp16 (training_args.py); re-plan with --precision bf16");
  if (c.lora.quantized_base())
    refuse(plan, "QLoRA: run_lora_clm.py loads no 4-bit NF4 base (no bitsandbytes on Gaudi)");
  // --gradient_checkpointing checkpoints every decoder layer.
  if (const std::string why = torchtitan_only_recompute(c, false); !why.empty()) refuse(plan, why);
}

// One argument of the training script, written for both shells (see the top of the file).
std::string spawn_arg(const formats::Plan& plan, const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_@%+:,./=-").find(static_cast<char>(c)) != std::string_view::npos;
  });
  if (plain) return shell_quote(s);
  if (multi_node(plan))
    refuse(plan, "'" + comment_text(s) +
                     "' holds characters a multi-node run cannot pass (DeepSpeed's pdsh runner "
                     "re-parses the arguments through a shell): use [A-Za-z0-9_@%+:,./=-] only");
  std::string inner = "\"";
  for (const char c : s) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') inner.push_back('\\');
    inner.push_back(c);
  }
  return shell_quote(inner + "\"");
}

// The script's arguments, one element per line of the command ("--flag value ..." already quoted).
std::vector<std::string> script_args(const formats::Plan& plan, const std::string& ds_config_path) {
  const auto& c = plan.config;
  const bool lora = c.lora.enabled();
  std::vector<std::string> a;
  const auto flag = [&](std::string_view f) { a.emplace_back(f); };
  // A flag and its value, written for both shells; a value that could read as a flag goes in
  // --flag=value form.
  const auto arg = [&](std::string_view f, const std::string& v) {
    if (!v.empty() && v[0] == '-') a.push_back(spawn_arg(plan, std::string(f) + "=" + v));
    else a.push_back(std::string(f) + " " + spawn_arg(plan, v));
  };
  const std::string id = hub_id(plan.model);
  arg(hf::kModel, id.empty() ? plan.model.name : id);
  arg(hf::kDeepspeed, ds_config_path);
  if (lora) {
    arg(hf::kDatasetName, "tatsu-lab/alpaca");
    flag(hf::kDatasetConcatenation);  // packs the prompts into sequences of max_seq_length
  } else {
    arg(hf::kDatasetName, "wikitext");
    arg(hf::kDatasetConfigName, "wikitext-2-raw-v1");
  }
  if (c.precision == sim::Precision::bf16) arg(hf::kBf16, "True");
  arg(hf::kOutputDir, lora ? "./lora_out" : "./clm_out");
  arg(lora ? hf::kMaxSeqLength : hf::kBlockSize, std::to_string(c.seq_len));
  arg(hf::kPerDeviceBatch, std::to_string(c.micro_batch_size));
  arg(hf::kGradAccum, std::to_string(c.micro_batches()));
  if (c.recompute != sim::Recompute::none) flag(hf::kGradientCheckpointing);
  flag(hf::kDoTrain);
  arg(hf::kLoggingSteps, "1");
  flag(hf::kUseHabana);
  flag(hf::kUseLazyMode);
  if (!lora) arg(hf::kGaudiConfigName, "Habana/gpt2");  // run_clm.py loads a Gaudi config (README)
  flag(hf::kPipeliningFwdBwd);
  arg(hf::kThroughputWarmupSteps, "3");
  if (lora) {
    arg(hf::kLoraRank, std::to_string(c.lora.rank));
    arg(hf::kLoraAlpha, std::to_string(std::lround(c.lora.alpha)));
    std::ostringstream d;
    d << c.lora.dropout;
    arg(hf::kLoraDropout, d.str());
    std::string targets;
    for (const auto& t : c.lora.targets) targets += (targets.empty() ? "" : " ") + spawn_arg(plan, t);
    a.push_back(std::string(hf::kLoraTargets) + " " + targets);
  }
  if (sim::fused(c.attention)) {
    arg(hf::kAttnImplementation, std::string(hf::kAttnFused));
    arg(hf::kFlashCausalMask, "True");
  } else {
    arg(hf::kAttnImplementation, std::string(hf::kAttnEager));
  }
  if (c.uses_fp8()) arg(hf::kFp8, "True");
  if (c.cp > 1) arg(hf::kContextParallel, std::to_string(c.cp));
  return a;
}

}  // namespace

std::vector<std::string> habana_notes(const formats::Plan& plan) {
  const auto& c = plan.config;
  std::vector<std::string> n;
  if (hub_id(plan.model).empty())
    n.push_back(std::string(hf::kModel) + " is shardplan's model card name '" + plan.model.name +
                "': give the Hugging Face id or a local path of that model");
  if (c.casts_weights())
    n.push_back(
        "the plan keeps fp32 weights (autocast); DeepSpeed's bf16 mode keeps bf16 weights with an fp32 "
        "master copy");
  if (c.recompute == sim::Recompute::selective)
    n.push_back("selective recompute: " + std::string(hf::kGradientCheckpointing) +
                " recomputes whole decoder layers (exported as full recompute)");
  if (c.recompute_num_layers > 0)
    n.push_back(std::string(hf::kGradientCheckpointing) + " checkpoints every layer: recompute_num_layers " +
                std::to_string(c.recompute_num_layers) + " is not expressible");
  if (c.offload_activations) n.push_back("activation offload is not an option of the Hugging Face Trainer");
  if (c.zero_stage >= 1 && c.zero_stage < 3 && c.shard_group() < c.dp)
    n.push_back("a sharding degree below dp needs ZeRO-3 (mics_shard_size) in DeepSpeed; stage " +
                std::to_string(c.zero_stage) + " shards over all " + std::to_string(c.dp) + " ranks");
  if (c.fp32_grad_accum() && !(c.zero_stage == 1 && !c.offload_optimizer))
    n.push_back(
        "fp32 gradient accumulation of a bf16 run needs ZeRO-1 without offload in DeepSpeed "
        "(engine.py _do_optimizer_sanity_check); exported without it");
  if (c.uses_fp8() && c.fp8 != sim::Fp8Recipe::delayed)
    n.push_back(std::string("FP8 ") + sim::to_string(c.fp8) +
                " scaling: --fp8 runs the Gaudi Transformer Engine's "
                "DelayedScaling recipe (accelerate/utils/transformer_engine.py)");
  if (c.lora.enabled() && std::abs(c.lora.alpha - std::round(c.lora.alpha)) > 1e-9)
    n.push_back(std::string(hf::kLoraAlpha) + " is an integer in run_lora_clm.py: alpha rounded to " +
                std::to_string(std::lround(c.lora.alpha)));
  if (c.attention == sim::AttentionKind::flash1)
    n.push_back(
        "flash1 attention: gaudi_fused_sdpa runs Gaudi's fused SDPA kernel (the plan timed "
        "first-generation kernels)");
  if (c.cp > 1)
    n.push_back("context parallelism (DeepSpeed-Ulysses, " + std::string(hf::kContextParallel) +
                ") is beta in the README and not available for every model architecture");
  if (c.packed_document_tokens > 0)
    n.push_back(std::string(hf::kDatasetConcatenation) +
                " packs documents with full causal attention (no "
                "per-document masking)");
  if (!c.lora.enabled())
    n.push_back("full training runs run_clm.py on wikitext; point " + std::string(hf::kDatasetName) +
                " at your corpus");
  return n;
}

nlohmann::json habana_deepspeed_config(const formats::Plan& plan) {
  check_runnable(plan);
  const auto& c = plan.config;
  const std::string a(hf::kDsAuto);
  json z = {{hf::kDsStage, c.zero_stage}, {hf::kDsOverlapComm, false}, {hf::kDsContiguousGradients, false}};
  if (c.zero_stage == 3) {
    z[std::string(hf::kDsGather16Bit)] = true;
    if (c.shard_group() < c.dp) z[std::string(hf::kDsMicsShardSize)] = c.shard_group();
  }
  if (c.offload_optimizer) z[std::string(hf::kDsOffloadOptimizer)] = {{hf::kDsDevice, "cpu"}, {hf::kDsPinMemory, true}};
  json ds = {{hf::kDsStepsPerPrint, 64},
             {hf::kDsTrainBatch, a},
             {hf::kDsMicroBatch, a},
             {hf::kDsGradAccum, a},
             {hf::kDsBf16, {{hf::kDsEnabled, c.precision == sim::Precision::bf16}}},
             {hf::kDsGradientClipping, 1.0},
             {hf::kDsZero, z},
             {hf::kDsTimers, {{hf::kDsThroughput, {{hf::kDsEnabled, true}, {hf::kDsSynchronized, false}}}}}};
  if (c.precision == sim::Precision::bf16 && c.zero_stage == 1 && !c.offload_optimizer)
    ds[std::string(hf::kDsDataTypes)] = {{hf::kDsGradAccumDtype, c.fp32_grad_accum() ? "fp32" : "bf16"}};
  return ds;
}

std::string habana_command_line(const formats::Plan& plan, const std::string& ds_config_path) {
  check_runnable(plan);
  const auto& c = plan.config;
  const bool lora = c.lora.enabled();
  const auto args = script_args(plan, ds_config_path);  // refuses what a multi-node run cannot pass
  std::ostringstream s;
  for (const auto& n : habana_notes(plan)) s << "# shardplan note: " << comment_text(n) << "\n";
  s << "# Optimum-Habana language-modeling example (huggingface/optimum-habana examples/language-modeling at "
       "1d8504c): run from that directory; "
    << hf::kDeepspeed << " is the JSON of habana_deepspeed_config.\n";
  if (multi_node(plan))
    s << ": \"${HOSTFILE:?set HOSTFILE to a DeepSpeed hostfile of the " << plan.cluster.nodes
      << " nodes, one line each: <host> slots=" << plan.cluster.per_node() << "}\"\n";
  s << "PT_HPU_LAZY_MODE=1 " << (lora ? "PT_HPU_MAX_COMPOUND_OP_SIZE=10 " : "") << "python3 " << hf::kSpawnPath << " "
    << hf::kUseDeepspeed << " ";
  if (multi_node(plan)) s << hf::kHostfile << " \"$HOSTFILE\" ";
  else s << hf::kWorldSize << " " << c.devices() << " ";
  s << (lora ? hf::kLoraScript : hf::kClmScript);
  for (const auto& a : args) s << " \\\n  " << a;
  s << "\n";
  return s.str();
}

}  // namespace shardplan::interop
