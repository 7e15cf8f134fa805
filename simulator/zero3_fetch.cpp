// Legend: n ranks of the ZeRO-3 sharding group, S bytes of one full (gathered) tensor, w bytes
// per element, t_launch the profile's fixed cost per kernel.
//
// DeepSpeed 0.3.13-0.4.0 (partition_parameters.py, _allgather_param / _reduce_scatter_gradient):
//   fetch   per parameter tensor: torch.zeros(S) (a memset), torch.cuda.synchronize(), a Python
//           loop of n narrow() views, torch.distributed.all_gather(list of n views); PyTorch's
//           ProcessGroupNCCL::allgather then copies the flat result into each of the n views, one
//           copy kernel per rank (torch/lib/c10d/ProcessGroupNCCL.cpp, allgather). The next fetch
//           synchronises the device again, so nothing overlaps (deepspeedai/DeepSpeed pull #1188:
//           "the async version is not async at all, because each all_gather calls
//           torch.cuda.synchronize()").
//   reduce  per gradient tensor: the gradient divided by n in place first (stage3.py,
//           average_tensor: tensor.div_(world_size)), then reduce_scatter from a list of n views,
//           which ProcessGroupNCCL flattens first (flatten_for_scatter_gather: n copy kernels).
//   host    measured 130 us "pre_launch" + 250 us "launch" per parameter all-gather on a p4d
//           (8 x A100, PyTorch 1.8; deepspeedai/DeepSpeed issue #1069, 2021-06-21).
#include "zero3_fetch.hpp"

#include <algorithm>

#include "collectives.hpp"
#include "layer_cost.hpp"

namespace shardplan::simulator {
namespace {

constexpr double kHostPerCollectiveS = 380e-6;  // DeepSpeed issue #1069: 130 us + 250 us
// The Python loops over the group's n ranks that build the collective's list of views, per rank:
// measured by `/usr/bin/python3 bench/zero3_host_loop.py` (Debian python3-torch 1.13, AMD EPYC,
// 2026-11-25; 2.0 and 2.4 us, three runs within 0.1 us). Issue #1069's figures are for n = 8,
// where these loops are 16-19 us; at 2,240 ranks they are 4.5-5.4 ms per collective.
constexpr double kPyPerRankGatherS = 2.0e-6;  // narrow() + dist.get_rank(group) per rank
constexpr double kPyPerRankReduceS = 2.4e-6;  // bounds + grad.view(-1).narrow() per rank

// Everything of one blocking per-tensor collective except the wire time: the host's fixed cost,
// per rank of the group the Python view loop and one copy kernel of S / n bytes (read and
// written; timed at that size on the profile's memory-efficiency curve, launch included), and
// `whole_passes` passes over the whole buffer (the fetch's memset, the reduction's division).
double per_tensor_overhead_s(const ConfigContext& c, double bytes, double whole_passes, double py_per_rank_s) {
  const double n = c.shard;
  return kHostPerCollectiveS + n * (py_per_rank_s + memory_time_s(c.env, 2.0 * bytes / n)) +
         memory_time_s(c.env, whole_passes * bytes);
}

}  // namespace

std::vector<ParamTensor> block_param_tensors(const ModelContext& mc, int tp) {
  std::vector<ParamTensor> out;
  const bool lora = mc.lora.enabled();
  const double t = tp, r = mc.lora.rank;
  for (std::size_t i = 0; i < mc.linears.size(); ++i) {
    const auto& lin = mc.linears[i];
    out.push_back({lin.weight_local(t), !lora});
    if (lin.bias) out.push_back({lin.d_out_local(t), !lora});
    if (lora && mc.lora_mask[i]) {  // A (r x d_in), B (d_out x r); the tp split as in step_model
      out.push_back({r * lin.d_in_local(t), true});
      out.push_back({r * lin.d_out_local(t), true});
    }
  }
  const int per_norm = mc.model.norm_kind == NormKind::layernorm ? 2 : 1;
  for (int i = 0; i < mc.model.norms_per_layer * per_norm; ++i)
    out.push_back({static_cast<double>(mc.model.hidden), !lora});
  return out;
}

double largest_fetched_module(const ModelContext& mc, int tp) {
  double largest = 0;
  for (const auto& lin : mc.linears) {
    const double bias = !lin.bias ? 0.0 : lin.d_out_local(tp);
    largest = std::max(largest, lin.weight_local(tp) + bias);
  }
  return largest;
}

Zero3SyncTime per_tensor_sync_time(const ConfigContext& c, const ChunkShape& sh) {
  const auto& hw = c.mc->cluster.hardware;
  const double w = c.param_bytes;
  // One fetch: the memset of S, the all-gather, the n per-rank copies out of the flat result.
  auto fetch = [&](double elements) {
    const double S = w * elements;
    return per_tensor_overhead_s(c, S, 1.0, kPyPerRankGatherS) + all_gather_s(S, c.shard_group, hw, c.per_node);
  };
  // One gradient reduce-scatter: the in-place division (S read and written), the n per-rank
  // copies into the flat input, the collective.
  auto reduce = [&](double elements) {
    const double S = w * elements;
    return per_tensor_overhead_s(c, S, 2.0, kPyPerRankReduceS) + reduce_scatter_s(S, c.shard_group, hw, c.per_node);
  };
  double fetch_block = 0, reduce_block = 0;
  for (const auto& p : block_param_tensors(*c.mc, c.cfg->tp)) {
    if (p.elements >= kPersistenceThresholdElements) fetch_block += fetch(p.elements);
    if (p.trainable) reduce_block += reduce(p.elements);
  }
  // The embedding and the head: one tensor each (word embedding, lm head) dominates.
  const bool lora = c.mc->lora.enabled();
  double fetch_edge = 0, reduce_edge = 0;
  if (sh.embedding) fetch_edge += fetch(c.embedding_params), reduce_edge += lora ? 0.0 : reduce(c.embedding_params);
  if (sh.head && c.head_params > 0)
    fetch_edge += fetch(c.head_params), reduce_edge += lora ? 0.0 : reduce(c.head_params);
  // A recomputed block runs its modules' forward hooks again in backward: fetched again (op_sac
  // reruns every block's forward, taking the kept ops' outputs from its cache).
  const double refetched = c.cfg->recompute == Recompute::op_sac ? sh.layers : sh.recomputed;
  Zero3SyncTime t;
  t.forward_s = sh.layers * fetch_block + fetch_edge;
  t.backward_s = (sh.layers + refetched) * fetch_block + sh.layers * reduce_block + fetch_edge + reduce_edge;
  t.comm_s = t.forward_s + t.backward_s;
  return t;
}

}  // namespace shardplan::simulator
