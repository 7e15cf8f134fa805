// NeuronX Distributed (trn1) from a Plan: the torchrun line of the NxD Llama pretraining example
// that runs it — tp_zero1_llama_hf_pretrain.py for pp 1, run_llama_nxd.py (tp_pp) otherwise —
// with the environment its launcher exports. Names and sources in neuron_flags.hpp
// (aws-neuron/neuronx-distributed fbac349, examples at fecfe75).
//
// Degrees are NeuronCores: the plan must be on a profile that counts them (trn1.32xlarge-neuroncore,
// 32 per node). A plan on trn1.32xlarge counts Trainium chips (16 per node, 2 cores each) and is
// refused rather than converted: every rank's memory, FLOP/s and link share were planned per chip,
// so doubling the degrees would run a different plan than the one that was simulated.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "launch_export.hpp"
#include "neuron.hpp"
#include "neuron_flags.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace nf = neuron_flags;
using formats::comment_text;
using formats::shell_quote;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& text, std::initializer_list<const char*> words) {
  const std::string l = lower(text);
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return l.find(w) != std::string::npos; });
}

[[noreturn]] void refuse(const formats::Plan& plan, const std::string& why) {
  throw sim::InputError("NeuronX Distributed export of " + plan.model.name + ": " + why);
}

// One word of the generated line: quoted with shell_quote unless `raw` (fixed text of ours that
// the shell must expand, such as "$DATA_PATH").
struct Word {
  std::string text;
  bool raw = false;
};
using Words = std::vector<Word>;

void add(Words& w, std::string_view flag) { w.push_back({std::string(flag)}); }
void add(Words& w, std::string_view flag, long long v) {
  w.push_back({std::string(flag)});
  w.push_back({std::to_string(v)});
}
void add(Words& w, std::string_view flag, const std::string& v, bool raw = false) {
  w.push_back({std::string(flag)});
  w.push_back({v, raw});
}

void check_hardware(const formats::Plan& plan) {
  const auto& hw = plan.cluster.hardware;
  if (!mentions(hw.name + " " + hw.description, {"trn1", "trn2", "trainium"}))
    refuse(plan, "hardware '" + hw.name +
                     "' is not AWS Trainium (its name or description names no trn1, trn2 or "
                     "Trainium); NeuronX Distributed runs on Trainium");
  // The NeuronCore profile says so in its name or description ("counted in NeuronCores"); the chip
  // profile's description names NeuronCore-v2 too, so the plain word is not enough.
  if (!mentions(hw.name, {"neuroncore"}) && !mentions(hw.description, {"counted in neuroncores"}))
    refuse(plan, "hardware '" + hw.name + "' counts Trainium chips (" + std::to_string(plan.cluster.per_node()) +
                     " per node) but NxD sizes tensor/pipeline/data parallelism in NeuronCores (2 per chip): "
                     "re-plan on trn1.32xlarge-neuroncore");
}

void check_runnable(const formats::Plan& plan) {
  const auto& c = plan.config;
  const auto& m = plan.model;
  check_hardware(plan);
  if (m.is_moe() || c.ep > 1)
    refuse(plan, "the NxD Llama examples have no experts (expert parallelism " + std::to_string(c.ep) + ")");
  if (m.family != "llama" || m.kind != sim::ModelKind::decoder || m.mla.enabled())
    refuse(plan, "the NxD Llama examples build LlamaForCausalLM (modeling_llama_nxd.py); the model is family '" +
                     m.family + "'");
  if (c.zero_stage >= 2)
    refuse(plan, "ZeRO-" + std::to_string(c.zero_stage) + ": NxD's optimizer shards optimizer states only (ZeRO-1, " +
                     std::string(nf::kZ1UseZero1) + " / " + std::string(nf::kPpUseZero1) + ")");
  if (c.cp > 1 && c.cp_kind != sim::CpKind::ring)
    refuse(plan,
           "context parallelism in NxD is ring attention (modeling_llama_nxd.py, nki_ring_attn_func): re-plan "
           "with --cp-kind ring");
  if (c.lora.enabled()) refuse(plan, "LoRA: the NxD pretraining examples train every weight (no PEFT)");
  if (c.uses_fp8()) refuse(plan, "FP8: the NxD Llama examples train in bf16 (no FP8 recipe)");
  if (c.precision != sim::Precision::bf16)
    refuse(plan, std::string("precision ") + sim::to_string(c.precision) +
                     ": the NxD Llama examples train in bf16 (XLA_DOWNCAST_BF16 / XLA_USE_BF16 or the compiler's "
                     "bf16 auto-cast); re-plan with --precision bf16");
  if (c.offload_optimizer || c.offload_activations)
    refuse(plan, "offload: the NxD Llama examples keep optimizer states and activations on the NeuronCores");
  // NxD's full and selective checkpointing take every decoder layer.
  if (const std::string why = torchtitan_only_recompute(c, false); !why.empty()) refuse(plan, why);
  if (c.has_empty_chunk())
    refuse(plan,
           "an embedding-only first or head-only last pipeline stage is not expressible (run_llama_nxd.py "
           "partitions the layers automatically)");
}

bool pipeline_script(const sim::ParallelConfig& c) { return c.pp > 1; }

// The HF config directory the script reads the model's shape from, relative to the script's
// directory; "" when the example ships none for this model.
std::string shipped_config(const formats::Plan& plan) {
  const std::string_view dir = pipeline_script(plan.config) ? nf::kPipelineDir : nf::kZero1Dir;
  for (const auto& s : nf::kShippedConfigs)
    if (s.model == plan.model.name)
      return s.dir == dir ? std::string(s.config) : "../" + std::string(s.dir) + "/" + std::string(s.config);
  return "";
}

std::string config_dir(const formats::Plan& plan) {
  const std::string shipped = shipped_config(plan);
  return shipped.empty() ? plan.model.name + "_config" : shipped;
}

bool selective(const sim::ParallelConfig& c) { return c.recompute != sim::Recompute::full; }
// NxD's NKI flash kernel; with cp > 1 the ring-attention kernel runs instead and the model code
// refuses use_flash_attention (modeling_llama_nxd.py: "Context parallelism is not supported with
// flash attention").
bool flash(const sim::ParallelConfig& c) { return c.cp == 1 && sim::fused(c.attention); }
bool gpu_compatible(const sim::ParallelConfig& c) { return c.zero_stage == 1 && c.fp32_grad_accum(); }

Words zero1_args(const formats::Plan& plan) {
  const auto& c = plan.config;
  Words w;
  add(w, nf::kZ1ModelPath, config_dir(plan));
  add(w, nf::kZ1DataDir, "\"$DATA_PATH\"", true);
  add(w, nf::kTensorParallel, c.tp);
  if (c.cp > 1) add(w, nf::kContextParallel, c.cp);
  add(w, nf::kZ1BatchSize, c.micro_batch_size);
  add(w, nf::kZ1GradAccum, c.micro_batches());
  add(w, nf::kSeqLen, c.seq_len);
  // The launcher's schedule (TOTAL_STEPS, STEPS_THIS_RUN -1 = no early exit, WARMUP_STEPS, LR).
  add(w, nf::kZ1MaxSteps, 10000);
  add(w, nf::kZ1StepsThisRun, -1);
  add(w, nf::kZ1WarmupSteps, 100);
  add(w, nf::kZ1Lr, "3.0e-4");
  add(w, nf::kZ1MixPrecision);
  if (c.zero_stage == 1) add(w, nf::kZ1UseZero1);
  if (c.sequence_parallel) add(w, nf::kZ1SequenceParallel);
  if (selective(c)) add(w, nf::kZ1SelectiveCheckpoint);
  add(w, nf::kGpuCompatiblePrecision, gpu_compatible(c) ? 1 : 0);
  add(w, nf::kFlashAttention, flash(c) ? 1 : 0);
  add(w, nf::kZ1LoggingInterval, 10);
  return w;
}

Words pipeline_args(const formats::Plan& plan) {
  const auto& c = plan.config;
  Words w;
  add(w, nf::kPpTrainingDir, "\"$DATA_PATH\"", true);
  add(w, nf::kPpTrainingConfig, config_dir(plan));
  add(w, nf::kPpTrainBatchSize, static_cast<long long>(c.micro_batch_size) * c.micro_batches());
  add(w, nf::kPpNumMicrobatches, c.micro_batches());
  add(w, nf::kSeqLen, c.seq_len);
  add(w, nf::kTensorParallel, c.tp);
  add(w, nf::kPpPipelineParallel, c.pp);
  add(w, nf::kPpVirtualPipeline, c.schedule == sim::PipelineSchedule::interleaved ? c.virtual_stages : 1);
  if (c.cp > 1) add(w, nf::kContextParallel, c.cp);
  add(w, nf::kPpUseZero1, c.zero_stage == 1 ? 1 : 0);
  add(w, nf::kPpSequenceParallel, c.sequence_parallel ? 1 : 0);
  add(w, nf::kPpSelectiveCheckpoint, selective(c) ? 1 : 0);
  add(w, nf::kGpuCompatiblePrecision, gpu_compatible(c) ? 1 : 0);
  if (!gpu_compatible(c)) add(w, nf::kPpFp32Optimizer, 1);  // the fp32 master copy, in the optimizer
  add(w, nf::kFlashAttention, flash(c) ? 1 : 0);
  add(w, nf::kPpMetaDeviceInit, 1);
  // The launcher's optimizer and schedule (run_llama2_70B_tp_pp.sh).
  add(w, nf::kPpMaxSteps, 30000);
  add(w, nf::kPpLr, "0.00015");
  add(w, nf::kPpMinLr, "1e-05");
  add(w, nf::kPpBeta1, "0.9");
  add(w, nf::kPpBeta2, "0.95");
  add(w, nf::kPpWeightDecay, "0.1");
  add(w, nf::kPpWarmupSteps, 2000);
  add(w, nf::kPpConstantSteps, 0);
  return w;
}

// The launchers' exports (fixed text; $HOME expands when the script runs).
std::vector<std::string> environment(const formats::Plan& plan) {
  const std::string cores = shell_quote(std::to_string(plan.cluster.per_node()));
  if (pipeline_script(plan.config))  // run_llama2_70B_tp_pp.sh
    return {"FI_EFA_USE_DEVICE_RDMA=1",
            "FI_PROVIDER=efa",
            "FI_EFA_FORK_SAFE=1",
            "XLA_DISABLE_FUNCTIONALIZATION=0",
            "NEURON_FUSE_SOFTMAX=1",
            "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS=7",
            "MALLOC_ARENA_MAX=128",
            std::string(nf::kEnvDowncastBf16) + "=1",
            "NEURON_CC_FLAGS=\"--model-type=transformer --cache_dir=$HOME/cache_dir_neuron/\""};
  std::vector<std::string> env = {
      // tp_zero1_llama2_7B_hf_pretrain.sh
      "NEURON_CC_FLAGS=\"--model-type transformer --cache_dir=$HOME/neuron_compile_cache/\"",
      "NEURON_FUSE_SOFTMAX=1",
      "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS=3",
      "MALLOC_ARENA_MAX=64",
      "NEURON_RT_NUM_CORES=" + cores,
      "TPU_NUM_DEVICES=" + cores,
      "TPU_CHIPS_PER_HOST_BOUNDS=" + cores};
  if (plan.cluster.nodes > 1) {
    env.push_back("FI_EFA_USE_DEVICE_RDMA=1");
    env.push_back("FI_PROVIDER=efa");
  }
  return env;
}

Words launcher(const formats::Plan& plan) {
  Words w{{std::string(nf::kTorchrun)}};
  add(w, nf::kNprocPerNode, plan.cluster.per_node());
  if (plan.cluster.nodes > 1) {
    add(w, nf::kNnodes, plan.cluster.nodes);
    add(w, nf::kNodeRank, "\"$NODE_RANK\"", true);
    add(w, nf::kMasterAddr, "\"$MASTER_ADDR\"", true);
    add(w, nf::kMasterPort, nf::kExamplePort);
  }
  w.push_back({std::string(pipeline_script(plan.config) ? nf::kPipelineScript : nf::kZero1Script)});
  return w;
}

std::string text_of(const Word& w) { return w.raw ? w.text : shell_quote(w.text); }

void recompute_notes(const sim::ParallelConfig& c, std::vector<std::string>& n) {
  if (c.recompute == sim::Recompute::none)
    n.push_back(
        "the NxD examples always checkpoint activations (selective: core attention, else every decoder "
        "layer); a plan without recompute is exported as selective");
  if (c.recompute_num_layers > 0)
    n.push_back("NxD's full checkpointing wraps every decoder layer: recompute_num_layers " +
                std::to_string(c.recompute_num_layers) + " is not expressible");
  if (c.pp > 1 && selective(c) && c.seq_len == 8192)
    n.push_back(
        "at seq_len 8192 run_llama_nxd.py's selective checkpointing also recomputes the MLP "
        "(selective_activation_checkpointing_modules)");
}

void model_notes(const formats::Plan& plan, std::vector<std::string>& n) {
  const auto& m = plan.model;
  const std::string flag(pipeline_script(plan.config) ? nf::kPpTrainingConfig : nf::kZ1ModelPath);
  if (shipped_config(plan).empty())
    n.push_back("the script builds the model from the Hugging Face config.json in " + flag + " " + config_dir(plan) +
                " (the example ships 7B/8B/13B/70B Llama configs only): put " + m.name + "'s config there");
  else
    n.push_back("the model's shape comes from " + flag + " " + shipped_config(plan) + " (the example's " + m.name +
                " config)");
  if (m.qk_norm || m.qkv_bias || m.out_proj_bias || m.mlp_bias)
    n.push_back("modeling_llama_nxd.py has no q/k norms or linear biases; " + m.name + " has some");
}

}  // namespace

std::vector<std::string> neuron_notes(const formats::Plan& plan) {
  const auto& c = plan.config;
  std::vector<std::string> n;
  if (c.casts_weights())
    n.push_back(
        "the plan keeps fp32 weights (autocast); NxD keeps bf16 weights on the device with an fp32 copy in "
        "the optimizer (AdamW_FP32OptimParams / master weights)");
  if (c.fp32_grad_accum() && c.zero_stage == 0)
    n.push_back("fp32 gradient accumulation needs ZeRO-1 in NxD (use_gpu_compatible_precision); exported without it");
  recompute_notes(c, n);
  if (c.zero_stage == 1 && c.shard_group() < c.dp)
    n.push_back("NxD's ZeRO-1 shards over the whole data-parallel group (" + std::to_string(c.dp) +
                " ranks); a sharding degree of " + std::to_string(c.shard_group()) + " is not expressible");
  if (c.pp > 1 && c.schedule == sim::PipelineSchedule::gpipe)
    n.push_back("GPipe: NxD runs 1F1B (Train1F1BSchedule, or TrainInterleavedSchedule with virtual stages)");
  if (c.pp > 1 && !c.partition.empty())
    n.push_back(
        "the explicit layer partition is not expressible: run_llama_nxd.py partitions automatically "
        "(auto_partition)");
  if (c.rank_order != "tp-dp-pp")
    n.push_back("rank order '" + c.rank_order +
                "' is not expressible: NxD orders ranks tp-cp-dp-pp (parallel_state.py)");
  if (c.cp > 1)
    n.push_back(
        "context parallelism: NxD gives each rank one contiguous 1/cp of the sequence "
        "(get_batch_on_this_context_parallel_rank) without the plan's causal load balancing, and runs the "
        "NKI ring-attention kernel (use_flash_attention 0)");
  if (c.tp_comm_overlap) n.push_back("tensor-parallel communication overlap is not an option of the NxD examples");
  if (c.packed_document_tokens > 0)
    n.push_back(
        "packed documents: the NxD examples attend causally over the whole packed sequence (no per-document "
        "masking)");
  if (c.attention == sim::AttentionKind::flash1 && c.cp == 1)
    n.push_back("flash1 attention: NxD runs its NKI flash-attention kernel (the plan timed first-generation kernels)");
  model_notes(plan, n);
  return n;
}

std::string neuron_command_line(const formats::Plan& plan) {
  check_runnable(plan);
  const bool pipeline = pipeline_script(plan.config);
  std::ostringstream s;
  for (const auto& n : neuron_notes(plan)) s << "# shardplan note: " << comment_text(n) << "\n";
  s << "# NeuronX Distributed Llama example (aws-neuron/neuronx-distributed, examples/training/llama/"
    << (pipeline ? nf::kPipelineDir : nf::kZero1Dir) << " at fecfe75): run from that directory on each of the "
    << plan.cluster.nodes << " node(s).\n";
  for (const auto& e : environment(plan)) s << "export " << e << "\n";
  s << ": \"${DATA_PATH:?set DATA_PATH to the tokenized dataset, e.g. $HOME/examples_datasets/"
       "wikicorpus_llama2_tokenized_4k (get_dataset.py)}\"\n";
  if (plan.cluster.nodes > 1) {
    s << ": \"${NODE_RANK:?set NODE_RANK to the index of this node, 0 to " << plan.cluster.nodes - 1 << "}\"\n";
    s << ": \"${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}\"\n";
  }
  Words words = launcher(plan);
  const Words args = pipeline ? pipeline_args(plan) : zero1_args(plan);
  for (std::size_t i = 0; i < words.size(); ++i) s << (i > 0 ? " " : "") << text_of(words[i]);
  for (const auto& a : args) {
    const bool flag = !a.raw && a.text.rfind("--", 0) == 0;
    s << (flag ? " \\\n  " : " ") << text_of(a);
  }
  s << "\n";
  return s.str();
}

}  // namespace shardplan::interop
