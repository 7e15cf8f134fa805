// Megatron-LM (pretrain_gpt.py) arguments from a Plan.
#include <algorithm>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "launch_export.hpp"
#include "megatron_flags.hpp"
#include "megatron_layout.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

using formats::comment_text;
using formats::safe_token;
using formats::shell_join;
using formats::shell_quote;

namespace sim = shardplan::simulator;
namespace mf = megatron_flags;

namespace {

using Args = std::vector<std::string>;

void add(Args& a, std::string_view flag) { a.emplace_back(flag); }
void add(Args& a, std::string_view flag, long long value) {
  a.emplace_back(flag);
  a.push_back(std::to_string(value));
}
void add(Args& a, std::string_view flag, const std::string& value) {
  a.emplace_back(flag);
  a.push_back(value);
}

// How the export states the partition: an even split needs nothing; "first stage X layers, last Y,
// the stages between split the rest evenly" without interleaving is
// --decoder-first/last-pipeline-num-layers (each > 0: TC:2303, 2322); any other split (interleaved,
// an embedding-only first or head-only last chunk) is a --pipeline-model-parallel-layout.
struct PipelineSplit {
  int first = 0;  // 0: flag not needed
  int last = 0;
  std::string layout;  // non-empty: the layout, which replaces the flags above and the virtual stages
};

PipelineSplit pipeline_split(const sim::ParallelConfig& c) {
  PipelineSplit e;
  const auto& p = c.partition;
  if (p.empty() || std::all_of(p.begin(), p.end(), [&](int l) { return l == p.front(); })) return e;
  const bool positive = std::all_of(p.begin(), p.end(), [](int l) { return l > 0; });
  bool edges = positive && c.virtual_stages == 1 && static_cast<int>(p.size()) == c.pp;
  for (int s = 2; edges && s + 1 < c.pp; ++s) edges = p[static_cast<std::size_t>(s)] == p[1];
  if (!edges) return {0, 0, megatron_layout(p)};
  if (c.pp == 2) return {p[0], p[1], ""};
  e.first = p.front() != p[1] ? p.front() : 0;
  e.last = p.back() != p[1] ? p.back() : 0;
  return e;
}

void parallel_args(const Plan& plan, Args& a) {
  const auto& c = plan.config;
  add(a, mf::tp, c.tp);
  add(a, mf::pp, c.pp);
  if (c.cp > 1) {  // Megatron-Core context parallelism: p2p = ring, a2a = Ulysses
    add(a, mf::cp, c.cp);
    add(a, mf::cp_comm_type, c.cp_kind == sim::CpKind::all_to_all ? "a2a" : "p2p");
  }
  if (plan.model.is_moe()) {  // parallel folding: experts over ep x etp ranks of each stage
    add(a, mf::ep, c.ep);
    add(a, mf::etp, c.expert_tp());
  }
  const PipelineSplit e = pipeline_split(c);
  if (c.schedule == sim::PipelineSchedule::interleaved && e.layout.empty())
    add(a, mf::virtual_stages, c.virtual_stages);
  if (e.first > 0) add(a, mf::first_stage_layers, e.first);
  if (e.last > 0) add(a, mf::last_stage_layers, e.last);
  if (!e.layout.empty()) add(a, mf::pipeline_layout, e.layout);
  if (c.sequence_parallel) add(a, mf::sequence_parallel);
  if (c.tp_comm_overlap) add(a, mf::tp_comm_overlap);  // TE userbuffers; Megatron-Core
  if (c.rank_order == "tp-pp-dp") add(a, mf::tp_pp_dp_mapping);
  if (c.dp > 1) add(a, mf::overlap_grad_reduce);  // the simulator overlaps the DP reduction per bucket
  if (c.zero_stage >= 2) {
    // Megatron-FSDP shards gradients (optim_grads) and parameters too (optim_grads_params); its
    // v1 runs on the distributed optimizer (arguments.py:1118-1135 @ d98e8a64).
    add(a, mf::megatron_fsdp);
    add(a, mf::fsdp_sharding, std::string(c.zero_stage == 2 ? "optim_grads" : "optim_grads_params"));
  }
  if (c.zero_stage >= 1) {
    add(a, mf::distributed_optimizer);
    if (c.dp > 1) add(a, mf::overlap_param_gather);
    if (c.shard_group() < c.dp) add(a, mf::optimizer_instances, c.dp / c.shard_group());
    if (c.offload_optimizer) {
      add(a, mf::optimizer_cpu_offload);
      add(a, mf::precision_aware_optimizer);  // A:1884: the offload asserts it
    }
  }
  if (c.grad_accum_dtype == sim::GradAccumDtype::fp32) add(a, mf::fp32_grad_reduce);
}

void model_args(const sim::ModelSpec& m, int seq_len, Args& a) {
  add(a, mf::num_layers, m.num_layers);
  add(a, mf::hidden_size, m.hidden);
  add(a, mf::num_heads, m.num_heads);
  if (m.head_dim * m.num_heads != m.hidden) add(a, mf::kv_channels, m.head_dim);
  add(a, mf::ffn_hidden_size, m.ffn_hidden);
  if (m.num_kv_heads != m.num_heads) {
    add(a, mf::group_query_attention);
    add(a, mf::num_query_groups, m.num_kv_heads);
  }
  add(a, mf::seq_length, seq_len);
  add(a, mf::max_positions, std::max<long long>(m.max_positions, seq_len));
  if (m.ffn_kind == sim::FfnKind::swiglu) add(a, mf::swiglu);
  add(a, mf::normalization, m.norm_kind == sim::NormKind::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (m.positional == sim::PositionalKind::rotary) {
    add(a, mf::position_embedding, "rope");
    if (m.rotary_dim > 0 && m.rotary_dim < m.head_dim) {
      std::ostringstream pct;
      pct << static_cast<double>(m.rotary_dim) / static_cast<double>(m.head_dim);
      add(a, mf::rotary_percent, pct.str());
    }
  } else {
    add(a, mf::position_embedding, "learned_absolute");
  }
  if (!m.tied_embeddings) add(a, mf::untie_embeddings);
  if (m.qk_norm) add(a, mf::qk_layernorm);
  if (m.mla.enabled()) {  // Megatron-Core MLATransformerConfig: qk-head-dim is the non-rotary part
    add(a, mf::mla);
    if (m.mla.q_lora_rank > 0) add(a, mf::q_lora_rank, m.mla.q_lora_rank);
    add(a, mf::kv_lora_rank, m.mla.kv_lora_rank);
    add(a, mf::qk_head_dim, m.head_dim - m.mla.qk_rope_head_dim);
    add(a, mf::qk_pos_emb_head_dim, m.mla.qk_rope_head_dim);
    add(a, mf::v_head_dim, m.mla.v_head_dim);
  }
  if (m.is_moe()) {
    add(a, mf::num_experts, m.moe.num_experts);
    add(a, mf::router_topk, m.moe.top_k);
    add(a, mf::moe_ffn_hidden_size, m.moe.expert_ffn_hidden);
    if (m.moe.shared_ffn_hidden > 0) add(a, mf::shared_expert_size, m.moe.shared_ffn_hidden);
    if (m.moe.shared_expert_gate) add(a, mf::shared_expert_gate);
    if (m.moe.first_dense_layers > 0)
      add(a, mf::moe_layer_freq,
          "([0]*" + std::to_string(m.moe.first_dense_layers) + "+[1]*" +
              std::to_string(m.num_layers - m.moe.first_dense_layers) + ")");
    add(a, mf::token_dispatcher, "alltoall");
    add(a, mf::grouped_gemm);
  }
  if (!m.qkv_bias && !m.out_proj_bias && !m.mlp_bias) add(a, mf::disable_bias_linear);
  if (m.qkv_bias && !m.out_proj_bias && !m.mlp_bias) {
    add(a, mf::disable_bias_linear);
    add(a, mf::add_qkv_bias);
  }
  std::ostringstream att, hid;
  att << m.attention_dropout;
  hid << m.hidden_dropout;
  add(a, mf::attention_dropout, att.str());
  add(a, mf::hidden_dropout, hid.str());
}

void training_args(const sim::ParallelConfig& c, Args& a) {
  add(a, mf::micro_batch, c.micro_batch_size);
  add(a, mf::global_batch, c.global_batch_size);
  if (c.moe_capacity_factor > 0) {
    std::ostringstream cf;
    cf << c.moe_capacity_factor;
    add(a, mf::capacity_factor, cf.str());
  }
  if (c.precision == sim::Precision::bf16) add(a, mf::bf16);
  if (c.precision == sim::Precision::fp16) add(a, mf::fp16);
  add(a, mf::attention_backend, sim::fused(c.attention) ? "flash" : "unfused");
  if (c.uses_fp8()) {  // Transformer Engine FP8 (megatron/training/arguments.py, Transformer-Engine group)
    add(a, mf::fp8_format, "hybrid");  // e4m3 forward, e5m2 gradients
    add(a, mf::fp8_recipe, sim::to_string(c.fp8));
    if (c.fp8 == sim::Fp8Recipe::delayed) {
      add(a, mf::fp8_amax_history, 1024);
      add(a, mf::fp8_amax_algo, "max");
    }
    if (c.fp8_param_gather) add(a, mf::fp8_param_gather);
  }
  if (c.recompute == sim::Recompute::full && c.recompute_num_layers > 0) {
    add(a, mf::recompute_granularity, "full");  // the first k layers of each stage (chunk)
    add(a, mf::recompute_method, "block");
    add(a, mf::recompute_num_layers, c.recompute_num_layers);
  } else if (c.recompute == sim::Recompute::full) {
    add(a, mf::recompute_granularity, "full");
    add(a, mf::recompute_method, "uniform");
    add(a, mf::recompute_num_layers, 1);
  } else if (c.recompute == sim::Recompute::selective) {
    add(a, mf::recompute_granularity, "selective");
  }
}

}  // namespace

std::vector<std::string> megatron_args(const Plan& plan) {
  // --recompute-method uniform/block checkpoints groups of layers or the first k of each stage.
  if (const std::string why = torchtitan_only_recompute(plan.config, false); !why.empty())
    throw sim::InputError("Megatron-LM export: " + why);
  Args a;
  parallel_args(plan, a);
  model_args(plan.model, plan.config.seq_len, a);
  training_args(plan.config, a);
  return a;
}

std::vector<std::string> megatron_notes(const Plan& plan) {
  const auto& c = plan.config;
  const auto& m = plan.model;
  std::vector<std::string> n;
  if (c.casts_weights())
    n.push_back(
        "the plan keeps fp32 weights (autocast); Megatron-LM's --bf16/--fp16 keep 16-bit weights with an "
        "fp32 master (re-plan with --mixed-precision master_weights for its memory)");
  if (c.attention == sim::AttentionKind::eager)
    n.push_back(
        "eager attention: the plan assumes the explicit (unfused) softmax path, which Megatron-Core runs "
        "with --attention-backend unfused; its memory holds the s x s scores");
  if (c.attention == sim::AttentionKind::flash1)
    n.push_back(
        "flash1 attention: the plan times first-generation fused kernels (flash-attn 1.x); "
        "--attention-backend flash runs whichever flash-attn is installed (2.x is faster: re-plan with "
        "--attention flash)");
  if (c.schedule == sim::PipelineSchedule::gpipe && c.pp > 1)
    n.push_back("GPipe schedule: Megatron-LM runs 1F1B (or interleaved 1F1B)");
  if (c.rank_order != "tp-dp-pp" && c.rank_order != "tp-pp-dp")
    n.push_back("rank order '" + c.rank_order +
                "' is not expressible (Megatron: tp-dp-pp, or tp-pp-dp with "
                "--use-tp-pp-dp-mapping)");
  if (c.offload_optimizer && c.zero_stage == 0)
    n.push_back("optimizer offload: --optimizer-cpu-offload needs the distributed optimizer (ZeRO >= 1)");
  if (c.offload_activations)
    n.push_back(
        "activation offload: Megatron's --cpu-offloading-num-layers N offloads the activations of N "
        "layers (N below the layer count); the plan offloads every stored activation, so it is left out");
  if (c.lora.enabled()) n.push_back("LoRA: Megatron-LM has no LoRA; use NeMo / Megatron-Bridge PEFT");
  if (c.lora.quantized_base())
    n.push_back("QLoRA's NF4 base has no Megatron-LM equivalent (bitsandbytes 4-bit via Hugging Face PEFT)");
  if (m.kind == sim::ModelKind::encoder) n.push_back("encoder model: use pretrain_bert.py, not pretrain_gpt.py");
  if (m.parallel_residual) n.push_back("parallel residual (GPT-J / NeoX) is not a pretrain_gpt.py option");
  if ((m.qkv_bias || m.out_proj_bias || m.mlp_bias) && !(m.qkv_bias && m.out_proj_bias && m.mlp_bias) &&
      !(m.qkv_bias && !m.out_proj_bias && !m.mlp_bias))
    n.push_back("the model's mix of linear biases is not expressible; Megatron keeps all of them");
  if (c.fusion != sim::Fusion::megatron && sim::has_fusable_layers(m))
    n.push_back(std::string(sim::to_string(c.fusion)) +
                " layers: the plan was simulated with a GEMM per projection (fusion: " + sim::to_string(c.fusion) +
                "); Megatron-Core fuses them (linear_qkv, linear_fc1, fused SwiGLU), so re-plan "
                "with --fusion megatron for the time and memory it will show");
  return n;
}

std::string megatron_command_line(const Plan& plan, const std::vector<std::string>& launcher) {
  std::vector<std::string> words = launcher;
  if (words.empty())
    words = {"torchrun",
             std::string(mf::nnodes),
             std::to_string(plan.cluster.nodes),
             std::string(mf::nproc_per_node),
             std::to_string(plan.cluster.per_node()),
             "pretrain_gpt.py"};
  std::ostringstream s;
  for (const auto& n : megatron_notes(plan)) s << "# shardplan note: " << comment_text(n) << "\n";
  s << shell_join(words);
  const auto args = megatron_args(plan);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool flag = args[i].rfind("--", 0) == 0;
    s << (flag ? " \\\n  " : " ") << shell_quote(args[i]);
  }
  s << "\n";
  return s.str();
}

}  // namespace shardplan::interop
