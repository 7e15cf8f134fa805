#include "layers.hpp"

#include <mutex>

#include "executor/errors.hpp"
#include "executor/model/cpu_kernels.hpp"
#include "executor/seed_hash.hpp"
#include "mappings.hpp"
#include "nf4_linear.hpp"
#include "sp_column_linear.hpp"
#include "zero_linear.hpp"

namespace shardplan::executor {

namespace {

// A new generator on `device` seeded with `seed`: on CUDA a copy of the device's default
// generator (device-generic API, no CUDA header) re-seeded, which resets its Philox offset.
at::Generator make_generator(uint64_t seed, torch::Device device) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  at::Generator global = at::globalContext().defaultGenerator(device);  // shares the default's state
  at::Generator g;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    g = global.clone();
  }
  g.set_current_seed(seed);
  return g;
}

}  // namespace

void DropoutRng::reseed(int64_t unit) {
  const uint64_t u = static_cast<uint64_t>(unit);
  replicated = make_generator(splitmix64(splitmix64(key) + u), device);
  sharded = make_generator(splitmix64(splitmix64(splitmix64(key) ^ (tp_salt + 1)) + u), device);
}

torch::Tensor dropout(const torch::Tensor& x, double p, const TpContext& ctx, bool sharded) {
  if (p <= 0.0 || !ctx.training) return x;
  EXECUTOR_CHECK(ctx.rng != nullptr, "dropout needs a DropoutRng");
  at::Generator& gen = sharded ? ctx.rng->sharded : ctx.rng->replicated;
  // A one-byte mask is what backward keeps (masked_fill saves it), as Megatron's dropout does.
  const torch::Tensor dropped =
      torch::empty(x.sizes(), x.options().dtype(torch::kFloat)).bernoulli_(1.0 - p, gen).eq(0.0);
  return x.masked_fill(dropped, 0.0) * (1.0 / (1.0 - p));
}

namespace {

// y += scale * B(A(dropout(x))) for a column-parallel linear: x: (B, Sx, in), y: (B, S, out/t).
torch::Tensor add_column_lora(const LoraAdapter& lora, const torch::Tensor& x, torch::Tensor y, const TpContext& ctx) {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel;
  torch::Tensor h = zero_linear(dropout(x, lora.dropout, ctx, sp), lora.A);  // (B, Sx, r)
  h = sp ? gather_from_seq(h, tp) : copy_to_tp(h, tp);                       // (B, S, r)
  return y + lora.scale * zero_linear(h, lora.B);                            // (B, S, out/t)
}

// The base GEMM x @ W^T (no bias): the weight parameter, or the NF4 base dequantised per use.
torch::Tensor base_linear(const ParallelLinear& l, const torch::Tensor& x) {
  return l.nf4 ? nf4_linear(x, l.nf4->q) : zero_linear(x, l.weight, {}, /*into_grad=*/true);
}

}  // namespace

std::vector<torch::Tensor> column_forward(const std::vector<const ParallelLinear*>& linears, const torch::Tensor& x,
                                          const TpContext& ctx) {
  std::vector<torch::Tensor> ys;
  if (!ctx.sequence_parallel || ctx.tp->size() == 1) {
    for (const ParallelLinear* l : linears) ys.push_back(l->forward(x, ctx));
    return ys;
  }
  if (linears.front()->nf4) {  // NF4 bases keep no input: one gather, its backward one reduce-scatter
    const torch::Tensor xin = gather_from_seq(x, *ctx.tp);  // (B, S, in)
    for (const ParallelLinear* l : linears) ys.push_back(base_linear(*l, xin));
  } else {
    std::vector<torch::Tensor> weights;
    for (const ParallelLinear* l : linears) {
      EXECUTOR_CHECK(l->column && !l->nf4, "column_forward got a row-parallel or a mix of NF4 and other linears");
      weights.push_back(l->weight);
    }
    ys = sp_column_linears(x, weights, *ctx.tp);  // x: (B, S/t, in) -> (B, S, out_i/t)
  }
  for (size_t i = 0; i < linears.size(); ++i) {
    const ParallelLinear& l = *linears[i];
    if (l.bias.defined()) ys[i] = ys[i] + l.bias.to(ys[i].scalar_type());
    if (l.lora) ys[i] = add_column_lora(*l.lora, x, ys[i], ctx);
  }
  return ys;
}

torch::Tensor ParallelLinear::forward(const torch::Tensor& x, const TpContext& ctx) const {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel;
  if (column) {
    if (sp && tp.size() > 1) return column_forward({this}, x, ctx)[0];
    // x: (B, S, in) -> y: (B, S, out/t)
    torch::Tensor y = base_linear(*this, copy_to_tp(x, tp));
    if (bias.defined()) y = y + bias.to(y.scalar_type());
    return lora ? add_column_lora(*lora, x, y, ctx) : y;
  }
  // x: (B, S, in/t) -> partial (B, S, out) -> y: (B, Sx, out)
  torch::Tensor y = base_linear(*this, x);
  y = sp ? reduce_scatter_seq(y, tp) : reduce_from_tp(y, tp);
  if (bias.defined()) y = y + bias;
  if (lora) {
    torch::Tensor h = zero_linear(dropout(x, lora->dropout, ctx, true), lora->A);  // (B, S, r) partial
    h = sp ? reduce_scatter_seq(h, tp) : reduce_from_tp(h, tp);                    // (B, Sx, r)
    y = y + lora->scale * zero_linear(h, lora->B);                                 // (B, Sx, out)
  }
  return y;
}

namespace {

// weight[ids] as one autograd node whose backward adds each row's gradient into weight.grad()
// itself (index_add_, as embedding_dense_backward adds into its zeroed table) and returns none;
// without a .grad to add into, the dense gradient as torch::embedding's backward gives it.
struct EmbeddingRowsIntoGrad : torch::autograd::Function<EmbeddingRowsIntoGrad> {
  // weight: (V, H), ids: (B, S) -> (B, S, H)
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               const torch::Tensor& ids) {
    ctx->save_for_backward({weight, ids});  // weight: the parameter itself, for its .grad
    return torch::embedding(weight, ids);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& weight = saved[0];
    const torch::Tensor idx = saved[1].reshape({-1});
    const torch::Tensor rows = g[0].reshape({-1, weight.size(1)});  // (B*S, H)
    torch::Tensor grad = weight.grad();
    if (grad.defined() && grad.scalar_type() == rows.scalar_type() && grad.device() == rows.device()) {
      torch::NoGradGuard no_grad;
      grad.index_add_(0, idx, rows);
      return {torch::Tensor(), torch::Tensor()};
    }
    return {torch::zeros_like(weight).index_add_(0, idx, rows.to(weight.scalar_type())), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor VocabEmbedding::forward(const torch::Tensor& ids, const TpContext& ctx) const {
  Communicator& tp = *ctx.tp;
  const int64_t rows = weight.size(0);
  const auto lookup = [&](const torch::Tensor& local) {  // (B, S, H)
    return rows_into_grad && weight.requires_grad() ? EmbeddingRowsIntoGrad::apply(weight, local)
                                                    : torch::embedding(weight, local);
  };
  if (tp.size() == 1 && valid == rows) {
    torch::Tensor e = lookup(ids);  // (B, S, H)
    return ctx.sequence_parallel ? scatter_to_seq(e, tp) : e;
  }
  const torch::Tensor outside = (ids < start) | (ids >= start + valid);
  const torch::Tensor local = (ids - start).masked_fill(outside, 0);
  torch::Tensor e = lookup(local).masked_fill(outside.unsqueeze(-1), 0.0);  // (B, S, H) partial
  return ctx.sequence_parallel ? reduce_scatter_seq(e, tp) : reduce_from_tp(e, tp);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// fp32 logits on the CPU take the fused row loops (model/cpu_kernels.hpp): exp and its row sum in
// one pass, and backward's normalise, target subtraction and scaling in one more.
bool fused_ce(const torch::Tensor& logits) {
  return logits.device().is_cpu() && logits.scalar_type() == torch::kFloat && logits.is_contiguous();
}

struct VocabParallelCE : torch::autograd::Function<VocabParallelCE> {
  // logits: (N, V/t), targets: (N) -> loss (N)
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor targets, int64_t start,
                               int64_t valid, Communicator* tp) {
    // One (N, V/t) fp32 buffer beside the logits: exp(z - zmax), normalised in place (op-by-op form)
    // or in backward's one pass (fused).
    const bool padded = valid < logits.size(1);  // padded vocabulary rows never win
    const bool fused = fused_ce(logits);
    torch::Tensor zmax = (padded ? logits.narrow(1, 0, valid) : logits).amax(1).to(torch::kFloat);  // (N)
    tp->all_reduce(zmax, ReduceOp::max);
    torch::Tensor ez, sum;
    if (fused) {
      ez = torch::empty_like(logits);
      sum = torch::empty_like(zmax);
      cpu::exp_shifted_rows(logits.data_ptr<float>(), zmax.data_ptr<float>(), ez.data_ptr<float>(),
                            sum.data_ptr<float>(), logits.size(0), logits.size(1), valid);
    } else {
      // fp32 logits: one pass (sub) instead of copy + sub_; 16-bit ones: the fp32 copy, shifted in place.
      ez = (logits.scalar_type() == torch::kFloat ? logits.sub(zmax.unsqueeze(1))
                                                  : logits.to(torch::kFloat).sub_(zmax.unsqueeze(1)))
               .exp_();
      if (padded) ez.narrow(1, valid, ez.size(1) - valid).zero_();
      sum = ez.sum(1);
    }
    tp->all_reduce(sum, ReduceOp::sum);
    const torch::Tensor ignored = targets.eq(-100);
    const torch::Tensor here = (targets >= start) & (targets < start + valid) & ignored.logical_not();
    const torch::Tensor idx = (targets - start).masked_fill(here.logical_not(), 0);
    torch::Tensor picked =
        (logits.gather(1, idx.unsqueeze(1)).squeeze(1).to(torch::kFloat) - zmax).masked_fill(here.logical_not(), 0.0);
    tp->all_reduce(picked, ReduceOp::sum);
    torch::Tensor loss = (sum.log() - picked).masked_fill(ignored, 0.0);
    // fused: exp(z - zmax) and its sum, normalised in backward's one pass; else the softmax.
    ctx->save_for_backward({fused ? ez : ez.div_(sum.unsqueeze(1)), idx, here, ignored, sum});
    ctx->saved_data["fused"] = fused;
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor grad = saved[0];  // exp(z - zmax) or the softmax (N, V/t), freed with the context
    const torch::Tensor& idx = saved[1];
    const torch::Tensor& here = saved[2];
    const torch::Tensor& ignored = saved[3];
    const torch::Tensor& sum = saved[4];
    const torch::Tensor dloss = g[0].to(torch::kFloat) * ignored.logical_not().to(torch::kFloat);  // (N)
    if (ctx->saved_data["fused"].toBool()) {  // fused: grad = dloss / sum * exp(z - zmax) - dloss at the target
      const torch::Tensor coef = (dloss / sum).contiguous(), hit = (dloss * here.to(torch::kFloat)).contiguous();
      const torch::Tensor target = idx.to(torch::kLong).contiguous();
      cpu::cross_entropy_grad_rows(grad.data_ptr<float>(), coef.data_ptr<float>(), hit.data_ptr<float>(),
                                   target.data_ptr<int64_t>(), grad.size(0), grad.size(1));
      return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    grad.scatter_add_(1, idx.unsqueeze(1), here.to(torch::kFloat).neg().unsqueeze(1));
    grad.mul_(dloss.unsqueeze(1));
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t start,
                                           int64_t valid, Communicator& tp) {
  return VocabParallelCE::apply(logits, targets, start, valid, &tp);
}

}  // namespace shardplan::executor
