#include "nf4_base.hpp"

#include <algorithm>

#include "executor/errors.hpp"
#include "executor/parallel/nf4_linear.hpp"

namespace shardplan::executor {

namespace {

// The full tensor of a tp-sharded parameter (every tp rank gets it).
torch::Tensor gather_full_weight(const Parameter& p, Communicator* tp, int tp_size) {
  const torch::Tensor local = p.tensor.detach().contiguous();
  if (p.shard.replicated() || tp_size == 1) return merge_shards({local}, p.shard, p.full_shape);
  EXECUTOR_CHECK(tp != nullptr && tp->size() == tp_size, "quantize_base_nf4 needs the tp group");
  torch::Tensor all = torch::empty({tp_size * local.numel()}, local.options());
  tp->all_gather(all, local.view({-1}));
  std::vector<torch::Tensor> shards;
  for (int r = 0; r < tp_size; ++r)
    shards.push_back(all.narrow(0, r * local.numel(), local.numel()).view(local.sizes()));
  return merge_shards(shards, p.shard, p.full_shape);
}

// This rank's slice of `full`, agreed over tp: if any rank's shard is not block-aligned, every
// rank throws (so none waits in the next linear's gather).
Nf4Tensor slice_agreed(const Nf4Tensor& full, const Parameter& p, Communicator* tp, const ModelOptions& opt) {
  int64_t n = 1;
  for (int64_t d : p.full_shape) n *= d;
  const torch::Tensor all = torch::arange(n, torch::kLong).view(p.full_shape);
  const torch::Tensor index = take_shard(all, p.shard, opt.tp_rank, opt.tp);  // full index of each local weight
  std::string error;
  Nf4Tensor out;
  try {
    out = nf4_slice(full, index, "weight '" + p.name + "'");
  } catch (const InputError& e) { error = e.what(); }
  if (opt.tp > 1) {
    torch::Tensor failed = torch::tensor({error.empty() ? 0 : 1}, torch::kInt).to(tp->device());
    tp->all_reduce(failed, ReduceOp::max);
    if (failed.item<int>() != 0 && error.empty())
      error = "weight '" + p.name +
              "': another tensor-parallel rank's shard of it does not hold whole 64-weight "
              "NF4 blocks (its error names the run); plan another tensor_parallel or --lora-base bf16";
  }
  if (!error.empty()) throw InputError(error);
  return out;
}

}  // namespace

std::vector<ParallelLinear*> block_linears(Block& b) {
  return {&b.qkv, &b.q, &b.k, &b.v, &b.out, &b.fc, &b.gate, &b.up, &b.down};
}

std::vector<const ParallelLinear*> block_linears(const Block& b) {
  return {&b.qkv, &b.q, &b.k, &b.v, &b.out, &b.fc, &b.gate, &b.up, &b.down};
}

Nf4BaseSummary quantize_base_nf4(Transformer& model, Communicator* tp) {
  const auto& opt = model.options();
  if (model.spec().is_moe())
    throw InputError("model '" + model.spec().name +
                     "': an NF4 base (QLoRA) of a mixture-of-experts model (experts "
                     "in NF4) is not run by this shardrun; plan with --lora-base bf16");
  torch::NoGradGuard no_grad;
  std::vector<Parameter>& params = model.parameters();
  std::vector<bool> replaced(params.size(), false);
  Nf4BaseSummary summary;
  for (Block& b : model.blocks()) {
    for (ParallelLinear* l : block_linears(b)) {
      if (!l->weight.defined()) continue;
      const auto it =
          std::find_if(params.begin(), params.end(), [&](const Parameter& p) { return p.tensor.is_same(l->weight); });
      EXECUTOR_CHECK(it != params.end(), "a block linear's weight is not a model parameter");
      const Parameter& p = *it;
      const Nf4Tensor full = nf4_quantize(gather_full_weight(p, tp, opt.tp));
      auto w = std::make_shared<Nf4Weight>();
      w->name = p.name;
      w->full_shape = p.full_shape;
      w->shard = p.shard;
      w->q = slice_agreed(full, p, tp, opt);
      summary.linears += 1;
      summary.weights += w->q.numel();
      summary.bytes += w->q.bytes();
      l->nf4 = std::move(w);
      l->weight = torch::Tensor();
      replaced[static_cast<size_t>(it - params.begin())] = true;
    }
  }
  std::vector<Parameter> kept;
  kept.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    if (!replaced[i]) kept.push_back(std::move(params[i]));
  params = std::move(kept);  // the replaced weights' memory is freed here
  return summary;
}

}  // namespace shardplan::executor
