// Legend: Ψ parameters per tp rank on a stage (Ψ_t trainable), N ZeRO sharding group, w bytes
// per weight/gradient element (2 with master weights, 4 fp32 or autocast), m micro-batches.
// Model states (Rajbhandari et al. 2019, "ZeRO", §3): 2Ψ weights + 2Ψ gradients + 12Ψ
// optimizer (fp32 master, momentum, variance) — 4Ψ + 4Ψ + 8Ψ when the weights are fp32; stage 1
// shards the optimizer over N, stage 2 also the gradients, stage 3 also the weights. MiCS (Zhang et al. 2022) shards
// over a group smaller than DP and replicates across groups. fp32 gradient accumulation (grad_accum_dtype) adds a 4Ψ
// buffer, reduced in fp32.
#include "step_model.hpp"

#include <array>

#include "cache_reuse.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"
#include "flat_grad_fusion.hpp"
#include "order_statistics.hpp"
#include "rank_pace.hpp"
#include "zero3_fetch.hpp"

namespace shardplan::simulator {
namespace {

double lora_per_rank(const std::vector<LinearDesc>& linears, const std::vector<char>& mask, double r, int tp) {
  // Column-parallel base: A (r x d_in) replicated, B (d_out/t x r) split; row-parallel: A split.
  double n = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (!mask[i]) continue;
    const auto& lin = linears[i];
    n += r * lin.d_in_local(tp) + r * lin.d_out_local(tp);
  }
  return n;
}

// The profile's two-rank skew fraction scaled to n synchronising ranks: the expected maximum of
// n standard normal phases over that of two (Tippett 1925; order statistics of the normal).
double sync_skew_factor(double two_rank_fraction, int ranks) {
  return two_rank_fraction * expected_max_normal(ranks) / expected_max_normal(2);
}

}  // namespace

namespace {

// A block's cost and the same block keeping its activations (for the blocks full recompute of
// some blocks leaves out; equal unless ParallelConfig::recomputes_some_blocks).
void block_costs(const CostEnv& env, const ParallelConfig& config, PartCost& block, PartCost& kept) {
  block = block_cost(env);
  kept = block;
  if (config.recomputes_some_blocks()) {
    CostEnv k = env;
    k.recompute = Recompute::none;
    kept = block_cost(k);
  }
}

// Bytes of `params` elements as a ZeRO gather moves them, of which `linear_weights` are linear
// weights: 1 byte in FP8 (fp8_param_gather), NF4 under QLoRA.
double gather_bytes(const ParallelConfig& config, double w, double params, double linear_weights) {
  double bytes = w * params;
  if (config.fp8_param_gather) bytes -= (w - 1.0) * linear_weights;
  if (config.lora.quantized_base()) bytes -= (w - kNf4BytesPerWeight) * linear_weights;
  return bytes;
}

}  // namespace

namespace {

// One layout's rank groups. The search builds many contexts per layout (every micro-batch,
// recompute and SP choice of a block), so each thread keeps the last one it built.
struct LayoutGroups {
  std::string order;
  std::array<int, 9> key{};  // tp, cp, dp, pp, per node, shard dp, etp, ep, moe
  RankLayout layout{"tp-dp-pp", 1, 1, 1, 1};
  GroupPlacement dp_group, shard_group, replica_group, expert_dp_group;
  BlockGroups groups;
};

const LayoutGroups& layout_groups(const ModelContext& m, const ParallelConfig& config) {
  thread_local LayoutGroups last;
  const bool moe = m.model.is_moe();
  const int shard_dp = config.zero_stage > 0 ? config.shard_group() : 1;
  const std::array<int, 9> key{config.tp, config.cp,          config.dp, config.pp, m.cluster.per_node(),
                               shard_dp,  config.expert_tp(), config.ep, int(moe)};
  if (!last.order.empty() && last.key == key && last.order == config.rank_order) return last;
  last.layout = RankLayout(config.rank_order, config.tp, config.cp, config.dp, config.pp, m.cluster.per_node());
  last.order = config.rank_order;
  last.key = key;
  const RankLayout& layout = last.layout;
  last.dp_group = layout.dp_cp_group();
  last.shard_group = layout.dp_cp_group(shard_dp);
  last.replica_group = layout.group(Dim::dp, config.dp / shard_dp, shard_dp);
  last.groups = BlockGroups{layout.group(Dim::tp), layout.group(Dim::cp), {}, {}};
  last.expert_dp_group = GroupPlacement{};
  if (moe) {
    last.groups.ep = layout.expert_group(ExpertDim::ep, config.expert_tp(), config.ep);
    last.groups.etp = layout.expert_group(ExpertDim::etp, config.expert_tp(), config.ep);
    last.expert_dp_group = layout.expert_group(ExpertDim::edp, config.expert_tp(), config.ep);
  }
  return last;
}

}  // namespace

ConfigContext::ConfigContext(const ModelContext& m, const ParallelConfig& config)
    : mc(&m), cfg(&config), layout(layout_groups(m, config).layout) {
  const auto& counts = m.counts;
  const int tp = config.tp;
  const bool moe = m.model.is_moe();
  per_node = m.cluster.per_node();
  param_bytes = config.fp32_weights() ? 4.0 : 2.0;
  grad_bytes = config.fp32_grad_accum() ? 4.0 : param_bytes;
  // Dense weights are sharded over the data-parallel ranks times cp; experts over their
  // expert data-parallel group (Megatron-Core's distributed optimizer).
  const int shard_dp = config.zero_stage > 0 ? config.shard_group() : 1;
  shard = shard_dp * (config.zero_stage > 0 ? config.cp : 1);
  expert_shard = moe && config.zero_stage > 0 ? config.expert_dp() : 1;
  set_sync_skew(m.cluster.hardware.node.intra.sync_skew_fraction);
  const auto& intra = m.cluster.hardware.node.intra;
  rank_pace = simulator::rank_pace(intra.rank_speed_gap_fraction, intra.rank_speed_gap_ranks, per_node);
  const LayoutGroups& lg = layout_groups(m, config);
  dp_group = lg.dp_group;
  shard_group = lg.shard_group;
  replica_group = lg.replica_group;
  const BlockGroups groups = lg.groups;
  if (moe) expert_dp_group = lg.expert_dp_group;
  env = make_cost_env(m.model, m.cluster, config, m.linears, m.lora_mask, groups, moe ? &m.expert_linears : nullptr);
  if (moe) env.expert_lora_mask = &m.expert_lora_mask;
  block_params =
      static_cast<double>(per_rank(counts.per_layer - counts.per_layer_experts, counts.per_layer_tp_sharded, tp));
  env.warm_backward_fraction =
      warm_backward_fraction(env.cache_share_bytes, static_cast<double>(m.model.num_layers) / std::max(1, config.pp),
                             block_activation_bytes(env, config.recompute), (param_bytes + grad_bytes) * block_params);
  block_costs(env, config, block, block_kept);
  embedding = embedding_cost(env, m.model.tied_embeddings && config.pp == 1);
  head = head_cost(env);
  block_lora = m.lora.enabled() ? lora_per_rank(m.linears, m.lora_mask, m.lora.rank, tp) : 0.0;
  block_trainable = m.lora.enabled() ? block_lora : block_params;
  embedding_params = static_cast<double>(per_rank(counts.embedding, counts.embedding_tp_sharded, tp));
  head_params = static_cast<double>(per_rank(counts.head, counts.head_tp_sharded, tp));
  for (const LinearDesc& lin : m.linears) block_linear_weights += lin.weight_local(tp);
  block_gather_bytes = gather_bytes(config, param_bytes, block_params, block_linear_weights);
  if (moe) {
    expert_params = static_cast<double>(counts.per_expert) * (m.model.moe.num_experts / config.ep) / config.expert_tp();
    if (m.lora.enabled())  // E/ep experts' adapters, split over etp as ParallelLinear's
      expert_lora = lora_per_rank(m.expert_linears, m.expert_lora_mask, m.lora.rank, config.expert_tp()) *
                    (m.model.moe.num_experts / config.ep);
    expert_trainable = m.lora.enabled() ? expert_lora : expert_params;
    expert_gather_bytes = gather_bytes(config, param_bytes, expert_params, expert_params);
    if (m.model.moe.first_dense_layers > 0) {
      dense_env = make_cost_env(m.model, m.cluster, config, m.dense_linears, m.dense_lora_mask, groups);
      block_costs(dense_env, config, dense_block, dense_block_kept);
      dense_block_params = static_cast<double>(per_rank(counts.dense_layer, counts.dense_layer_tp_sharded, tp));
      dense_block_lora = m.lora.enabled() ? lora_per_rank(m.dense_linears, m.dense_lora_mask, m.lora.rank, tp) : 0.0;
      dense_block_trainable = m.lora.enabled() ? dense_block_lora : dense_block_params;
    }
  }
  if (m.model.tied_embeddings && config.pp > 1)  // Megatron keeps a copy of the word embedding
    head_params += static_cast<double>(m.model.vocab_size * m.model.hidden) / tp;
  // Activations to the next stage: (s/cp, b, h), split over tp (Megatron scatter/gather or SP).
  const double act = env.act_bytes * env.s * env.b * m.model.hidden / tp;
  const bool cross = config.pp > 1 && layout.pp_hop_crosses_nodes(0);
  p2p_s = config.pp > 1
              ? ::shardplan::simulator::p2p_s(act, cross, tp * config.cp * config.dp, m.cluster.hardware, per_node)
              : 0.0;
  set_zero_units();
}

void ConfigContext::set_zero_units() {
  const auto& c = *cfg;
  const auto& hw = mc->cluster.hardware;
  const bool lora = mc->lora.enabled();
  if (c.zero_stage < 2 || (shard <= 1 && expert_shard <= 1)) return;
  // Each micro-batch's gradients of a unit are copied into one flat bucket (read and written
  // once; only the padding zeroed) for the reduce-scatter, whose shard is added into the kept
  // one: 2w per gradient element plus 3w per shard element, unit by unit (shardrun's
  // FlatGroup::take_grads; DeepSpeed's stage-2 bucket copies).
  auto pack_s = [&](double elements, double n) {
    return elements > 0 ? memory_time_s(env, param_bytes * elements * (2 + 3 / n)) : 0.0;
  };
  ZeroUnits& z = zero_units;
  z.pack_block = pack_s(block_trainable, shard) + pack_s(expert_trainable, expert_shard);
  z.pack_dense = pack_s(dense_block_trainable, shard);
  if (!lora) z.pack_embedding = pack_s(embedding_params, shard), z.pack_head = pack_s(head_params, shard);
  if (c.zero_stage != 3) return;
  // An MoE block gathers its dense part over the data-parallel shard group and its experts over
  // the expert data-parallel one.
  z.gather_block = all_gather_s(block_gather_bytes, shard_group, hw, per_node) +
                   all_gather_s(expert_gather_bytes, expert_dp_group, hw, per_node);
  z.gather_dense = all_gather_s(param_bytes * dense_block_params, shard_group, hw, per_node);
  z.scatter_block = reduce_scatter_s(param_bytes * block_trainable, shard_group, hw, per_node) +
                    reduce_scatter_s(param_bytes * expert_trainable, expert_dp_group, hw, per_node);
  z.scatter_dense = reduce_scatter_s(param_bytes * dense_block_trainable, shard_group, hw, per_node);
  z.gather_embedding = all_gather_s(param_bytes * embedding_params, shard_group, hw, per_node);
  z.gather_head = all_gather_s(param_bytes * head_params, shard_group, hw, per_node);
}

int dense_layers_in_chunk(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage) {
  const int dense = static_cast<int>(m.moe.first_dense_layers);
  if (!m.is_moe() || dense == 0) return 0;
  const int index = model_chunk_index(cfg, chunk, stage);
  int first = 0;
  if (cfg.partition.empty()) first = index * static_cast<int>(m.num_layers / model_chunks(cfg));
  else  // partition entries in model order (a single-chunk partition: v = 1, the same order)
    for (int i = 0; i < index && first < dense; ++i) first += cfg.partition[static_cast<std::size_t>(i)];
  if (first >= dense) return 0;  // the dense blocks all come before this chunk
  return std::clamp(dense - first, 0, chunk_layers(m, cfg, chunk, stage));
}

ChunkShape chunk_shape(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage) {
  const int index = model_chunk_index(cfg, chunk, stage);
  ChunkShape sh{chunk_layers(m, cfg, chunk, stage), index == 0, index == model_chunks(cfg) - 1,
                dense_layers_in_chunk(m, cfg, chunk, stage)};
  // Every N-th block counts over the rank's chunks; the other policies count within the chunk.
  const int before = cfg.recompute_every > 1 ? rank_blocks_before(m, cfg, chunk, stage) : 0;
  sh.recomputed = cfg.recomputed_blocks(sh.layers, before);
  sh.dense_recomputed = cfg.recomputed_blocks(sh.dense_layers, before);  // the chunk's first blocks are dense
  return sh;
}

void ConfigContext::set_sync_skew(double two_rank_fraction) {
  if (two_rank_fraction <= 0) return;
  const auto& c = *cfg;
  // The largest group the step synchronises: TP per layer, ZeRO-3's gathers, pipeline p2p, CP and
  // EP per layer, ZeRO-2's reduce-scatters, the data-parallel gradient reduction. Every second of
  // compute is charged, forward and backward, whether or not its own pass synchronises: a rank
  // that fell behind in a forward without collectives (ZeRO 0-2) is still behind at the backward's
  // reduce-scatter or the step's all-reduce, and a slower core stays slower all step (tiny-gpt
  // ZeRO-2 bf16 on this project's 2-vCPU VM: under perf one rank spent 10-15 % of its time polling
  // MPI for the other, the other under 3 %).
  int group = 1;
  if (c.tp > 1) group = c.tp;
  if (c.pp > 1) group = std::max(group, 2);
  if (c.cp > 1) group = std::max(group, c.cp);  // ring steps / all-to-alls per layer
  if (c.ep > 1) group = std::max(group, c.ep);  // dispatch / combine per MoE layer
  if (c.zero_stage >= 2 && shard > 1) group = std::max(group, shard);
  if (c.dense_replicas() > 1) group = std::max(group, c.dense_replicas());
  sync_skew = sync_skew_factor(two_rank_fraction, group);
}

ChunkTime& ChunkTime::operator+=(const ChunkTime& o) {
  forward_s += o.forward_s;
  backward_s += o.backward_s;
  weight_grad_s += o.weight_grad_s;
  stored_bytes += o.stored_bytes;
  fwd_compute_s += o.fwd_compute_s;
  bwd_compute_s += o.bwd_compute_s;
  recompute_s += o.recompute_s;
  tp_comm_s += o.tp_comm_s;
  cp_comm_s += o.cp_comm_s;
  ep_comm_s += o.ep_comm_s;
  dp_exposed_s += o.dp_exposed_s;
  dp_total_s += o.dp_total_s;
  offload_exposed_s += o.offload_exposed_s;
  sync_wait_s += o.sync_wait_s;
  return *this;
}

namespace {

// How a chunk's blocks split: fully recomputed blocks and the others (`block_kept` is `block`
// unless only some recompute); an MoE model's dense blocks come first in their chunk, so they are
// recomputed first.
struct ChunkBlocks {
  double L = 0;  // blocks in the chunk
  int recomputed = 0;
  int dense = 0;
  int dense_recomputed = 0;
  double moe_layers = 0;  // the repeated block (MoE or dense model)
};

ChunkBlocks chunk_blocks(const ChunkShape& sh) {
  ChunkBlocks k;
  k.L = sh.layers;
  k.recomputed = sh.recomputed;
  k.dense = sh.dense_layers, k.dense_recomputed = sh.dense_recomputed;
  k.moe_layers = k.L - k.dense;
  return k;
}

// Weight-gradient elements a chunk produces per micro-batch: its blocks' trainable weights (the
// routed experts' apart), the embedding and head unless LoRA freezes them.
struct ChunkGrads {
  double expert = 0;
  double dense = 0;
  double all = 0;
};

ChunkGrads chunk_grads(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k) {
  const bool lora = c.mc->lora.enabled();
  ChunkGrads g;
  g.expert = k.moe_layers * c.expert_trainable;
  g.dense = k.moe_layers * c.block_trainable + k.dense * c.dense_block_trainable +
            (lora ? 0.0 : (sh.embedding ? c.embedding_params : 0) + (sh.head ? c.head_params : 0));
  g.all = g.dense + g.expert;
  return g;
}

// The compute and per-layer communication of the chunk's blocks, embedding and head.
void add_part_costs(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k, ChunkTime& t) {
  auto add = [&](const PartCost& p, double n) {
    t.fwd_compute_s += n * p.forward_s;
    t.bwd_compute_s += n * p.backward_s;
    t.recompute_s += n * p.recompute_s;
    t.tp_comm_s += n * (p.tp_comm_forward_s + p.tp_comm_backward_s);
    t.cp_comm_s += n * (p.cp_comm_forward_s + p.cp_comm_backward_s);
    t.ep_comm_s += n * (p.ep_comm_forward_s + p.ep_comm_backward_s);
    t.forward_s += n * p.forward_total_s();
    t.backward_s += n * p.backward_total_s();
    t.weight_grad_s += n * p.weight_grad_s;
    t.stored_bytes += n * p.stored_activation_bytes;
  };
  add(c.dense_block, k.dense_recomputed);
  add(c.dense_block_kept, k.dense - k.dense_recomputed);
  add(c.block, k.recomputed - k.dense_recomputed);
  add(c.block_kept, k.moe_layers - (k.recomputed - k.dense_recomputed));
  if (sh.embedding) add(c.embedding, 1);
  if (sh.head) add(c.head, 1);
}

// ZeRO-2/3's gradient bucket copies (ConfigContext::set_zero_units).
void add_bucket_copies(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k, ChunkTime& t) {
  const ConfigContext::ZeroUnits& z = c.zero_units;
  double pack = k.moe_layers * z.pack_block + k.dense * z.pack_dense;
  pack += (sh.embedding ? z.pack_embedding : 0) + (sh.head ? z.pack_head : 0);
  t.backward_s += pack;
  t.bwd_compute_s += pack;  // memory-bound work of the engine, on the compute stream
}

// ZeRO-3 with prefetch: parameters gathered layer by layer, prefetching the next behind the
// current one's compute; gradients reduce-scattered behind the backward. An MoE block gathers its
// dense part over the data-parallel shard group and its experts over the expert data-parallel one;
// a chunk's dense blocks and MoE blocks are averaged into one per-block figure.
void add_zero3_prefetched(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k, ChunkTime& t) {
  const auto& hw = c.mc->cluster.hardware;
  const ConfigContext::ZeroUnits& z = c.zero_units;
  const double L = k.L;
  const int recomputed = k.recomputed;
  auto per_block = [&](double moe_s, double dense_s) {
    return L > 0 ? (k.moe_layers * moe_s + k.dense * dense_s) / L : moe_s;
  };
  const double g = per_block(z.gather_block, z.gather_dense);
  const double rs = per_block(z.scatter_block, z.scatter_dense);
  const double edge = (sh.embedding ? z.gather_embedding : 0) + (sh.head ? z.gather_head : 0);
  const double ov = hw.node.intra.compute_overlap;  // CPU ranks under MPI: nothing hides
  const double fwd_exposed = exposed_beside(g, c.block.forward_total_s(), ov);
  const double block_bwd =
      L > 0 ? (recomputed * c.block.backward_total_s() + (L - recomputed) * c.block_kept.backward_total_s()) / L
            : c.block.backward_total_s();
  const double bwd_exposed = exposed_beside(g + rs, block_bwd, ov);
  const double exposed_f = L > 0 ? g + (L - 1) * fwd_exposed + edge : edge;
  const double exposed_b = L > 0 ? g + (L - 1) * bwd_exposed + rs + edge : edge;
  t.forward_s += exposed_f;
  t.backward_s += exposed_b;
  t.dp_exposed_s += exposed_f + exposed_b;
  t.dp_total_s += L * (2 * g + rs) + 2 * edge;
}

// ZeRO-2: gradients reduce-scattered every micro-batch, behind the backward (experts' over their group).
void add_zero2_reduce_scatter(const ConfigContext& c, const ChunkGrads& grads, ChunkTime& t) {
  const auto& hw = c.mc->cluster.hardware;
  const double rs = reduce_scatter_s(c.param_bytes * grads.dense, c.shard_group, hw, c.per_node) +
                    reduce_scatter_s(c.param_bytes * grads.expert, c.expert_dp_group, hw, c.per_node);
  const double exposed =
      exposed_in_buckets(rs, c.param_bytes * grads.all, t.bwd_compute_s, hw.node.intra.compute_overlap);
  t.backward_s += exposed;
  t.dp_exposed_s += exposed;
  t.dp_total_s += rs;
}

// ZeRO's per-micro-batch communication: ZeRO-3's gathers (blocking or prefetched) and
// reduce-scatters, ZeRO-2's reduce-scatters. Stages 0/1 reduce once per step (step_tail).
void add_zero_comm(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k, const ChunkGrads& grads,
                   ChunkTime& t) {
  const auto& cfg = *c.cfg;
  const bool sharded = c.shard > 1 || c.expert_shard > 1;
  if (cfg.zero_stage >= 2 && sharded) add_bucket_copies(c, sh, k, t);
  if (cfg.zero_stage == 3 && sharded && cfg.zero3_fetch == Zero3Fetch::per_tensor_sync) {
    const Zero3SyncTime z = per_tensor_sync_time(c, sh);  // blocking, tensor by tensor: all exposed
    t.forward_s += z.forward_s;
    t.backward_s += z.backward_s;
    t.dp_exposed_s += z.comm_s;
    t.dp_total_s += z.comm_s;
  } else if (cfg.zero_stage == 3 && sharded) {
    add_zero3_prefetched(c, sh, k, t);
  } else if (cfg.zero_stage == 2 && sharded) {
    add_zero2_reduce_scatter(c, grads, t);
  }
}

// Gradient accumulation between micro-batches (ZeRO 0/1: BF16_Optimizer's fp32 pass, or eager
// AccumulateGrad where no fused weight-gradient GEMM accumulates).
void add_grad_accumulation(const ConfigContext& c, const ChunkShape& sh, const ChunkBlocks& k, const ChunkGrads& grads,
                           ChunkTime& t) {
  const auto& cfg = *c.cfg;
  if (cfg.zero_stage <= 1 && cfg.bf16_optimizer_reduce()) {
    // fp32 accumulation beside the 16-bit weights (DeepSpeed BF16_Optimizer.update_hp_grads:
    // hp_grad.add_(lp.grad.to(fp32))), after every micro-batch: the cast reads w and writes 4
    // bytes per gradient, the add reads 4 + 4 and writes 4. Megatron's fused wgrad accumulates
    // into main_grad inside the GEMM (no pass).
    const double accumulate = memory_time_s(c.env, (c.param_bytes + 16.0) * grads.all);
    t.backward_s += accumulate;
    t.bwd_compute_s += accumulate;
  } else if (!cfg.wgrad_accumulates_in_gemm() && cfg.zero_stage <= 1 && cfg.micro_batches() > 1) {
    // Gradient accumulation: eager PyTorch keeps the first micro-batch's weight gradients as they
    // are and adds each later one into .grad (AccumulateGrad: both read, one written); Megatron-Core
    // accumulates inside the weight-gradient GEMM (gradient_accumulation_fusion). ZeRO-2/3 reduce
    // every micro-batch instead (the bucket copies above). Averaged over the step's micro-batches.
    // Gradients shardrun adds into the flat buffer itself need no pass (flat_grad_fusion.hpp).
    const FlatGradFusion into = flat_grad_fusion(c.mc->model, cfg, c.mc->lora.enabled());
    double in_flat = k.moe_layers * linears_into_flat(c.mc->linears, cfg, into) +
                     k.dense * linears_into_flat(c.mc->dense_linears, cfg, into);
    if (sh.head && into.head) in_flat += c.head_params;
    if (sh.embedding && into.embedding) in_flat += c.embedding_params;
    const double m = cfg.micro_batches();
    const double accumulate =
        (m - 1) / m * memory_time_s(c.env, 3 * c.param_bytes * std::max(0.0, grads.all - in_flat));
    t.backward_s += accumulate;
    t.bwd_compute_s += accumulate;
  }
}

// Fewer of the node's cores than the profile timed at once: the slowest of the job's ranks, not of
// the profiled ones, sets the pace (rank_pace.hpp).
void add_rank_pace(const ConfigContext& c, ChunkTime& t) {
  const double f = (c.rank_pace - 1) * t.fwd_compute_s, b = (c.rank_pace - 1) * t.bwd_compute_s;
  const double r = (c.rank_pace - 1) * t.recompute_s;
  t.fwd_compute_s += f;
  t.forward_s += f;
  t.bwd_compute_s += b;
  t.recompute_s += r;
  t.backward_s += b + r;
  t.weight_grad_s *= c.rank_pace;  // part of bwd_compute_s, at the same pace
}

// Every collective waits for the slowest rank: the compute since the last one, times the profile's
// skew fraction (two ranks), scaled to the group (ConfigContext::set_sync_skew).
void add_sync_skew(const ConfigContext& c, ChunkTime& t) {
  const double fwd = c.sync_skew * t.fwd_compute_s, bwd = c.sync_skew * (t.bwd_compute_s + t.recompute_s);
  t.forward_s += fwd;
  t.backward_s += bwd;
  t.sync_wait_s += fwd + bwd;
}

// Stored activations go to host during forward and come back for backward.
void add_activation_offload(const ConfigContext& c, ChunkTime& t) {
  const double xfer = t.stored_bytes / c.mc->cluster.hardware.host.link_bandwidth_Bps;
  const double f = std::max(0.0, xfer - t.fwd_compute_s), b = std::max(0.0, xfer - t.bwd_compute_s);
  t.forward_s += f;
  t.backward_s += b;
  t.offload_exposed_s += f + b;
}

}  // namespace

ChunkTime chunk_time(const ConfigContext& c, const ChunkShape& sh) {
  const auto& cfg = *c.cfg;
  const ChunkBlocks k = chunk_blocks(sh);
  ChunkTime t;
  add_part_costs(c, sh, k, t);
  const ChunkGrads grads = chunk_grads(c, sh, k);
  add_zero_comm(c, sh, k, grads, t);
  add_grad_accumulation(c, sh, k, grads, t);
  if (c.rank_pace < 1) add_rank_pace(c, t);
  if (c.sync_skew > 0) add_sync_skew(c, t);
  if (cfg.offload_activations) add_activation_offload(c, t);
  return t;
}

void flops_per_micro_batch(const ConfigContext& c, double* model, double* hardware) {
  const auto& cfg = *c.cfg;
  const ModelSpec& m = c.mc->model;
  const double L = static_cast<double>(m.num_layers), ranks = cfg.tp * cfg.cp;  // a micro-batch spans tp x cp ranks
  const double Ld = m.is_moe() ? static_cast<double>(m.moe.first_dense_layers) : 0.0;
  auto part = [](const PartCost& p) { return p.forward_flops + p.backward_flops; };
  *model = ranks * ((L - Ld) * part(c.block) + Ld * part(c.dense_block) + part(c.embedding) + part(c.head));
  double recomputed = 0;  // fully recomputed blocks; the others cost block_kept's recompute_flops
  for (int ch = 0; ch < cfg.virtual_stages; ++ch)
    for (int st = 0; st < cfg.pp; ++st) recomputed += chunk_shape(m, cfg, ch, st).recomputed;
  recomputed /= static_cast<double>(cfg.pp * cfg.virtual_stages) / model_chunks(cfg);  // DualPipe: each stage twice
  // Per block, dense and MoE blocks averaged.
  auto avg = [&](double moe, double dense) { return ((L - Ld) * moe + Ld * dense) / L; };
  const double full = avg(c.block.recompute_flops, c.dense_block.recompute_flops);
  const double kept = avg(c.block_kept.recompute_flops, c.dense_block_kept.recompute_flops);
  *hardware = *model + ranks * (recomputed * full + (L - recomputed) * kept + c.head.recompute_flops);
}

}  // namespace shardplan::simulator
