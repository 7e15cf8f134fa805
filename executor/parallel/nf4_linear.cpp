#include "nf4_linear.hpp"

#include "executor/model/autocast.hpp"
#include "executor/model/cpu_gemm.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Nf4Linear : torch::autograd::Function<Nf4Linear> {
  // x: (..., in) -> (..., out); `w` outlives the graph (the model holds it).
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const Nf4Tensor* w) {
    const auto dt = compute_dtype(x);
    ctx->saved_data["w"] = reinterpret_cast<int64_t>(w);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["compute_dtype"] = static_cast<int64_t>(dt);
    const torch::Tensor wd = nf4_dequantize(*w, dt);  // (out, in), freed on return
    return cpu::linear(x.to(dt), wd);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const auto* w = reinterpret_cast<const Nf4Tensor*>(ctx->saved_data["w"].toInt());
    const auto dt = static_cast<torch::ScalarType>(ctx->saved_data["compute_dtype"].toInt());
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = cpu::matmul(g[0].to(dt), nf4_dequantize(*w, dt)).to(x_dtype);  // (..., in)
    return {dx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor nf4_linear(const torch::Tensor& x, const Nf4Tensor& w) { return Nf4Linear::apply(x, &w); }

}  // namespace shardplan::executor
