#include "zero_linear.hpp"

#include "executor/model/autocast.hpp"
#include "executor/model/cpu_gemm.hpp"
#include "weight_grad_store.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether the weight gradient can be added into `grad` inside the GEMM: fp32 throughout, same device.
bool fp32_into(const torch::Tensor& grad, const torch::Tensor& gy) {
  return grad.defined() && grad.scalar_type() == torch::kFloat && gy.scalar_type() == torch::kFloat &&
         grad.device() == gy.device() && grad.is_contiguous();
}

struct ZeroLinear : torch::autograd::Function<ZeroLinear> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w, bool into_grad) {
    const auto dt = compute_dtype(x);
    const torch::Tensor xc = x.to(dt);
    // The input serves only the weight's gradient: a frozen (LoRA base) weight keeps none, as
    // PyTorch's own mm and Transformer Engine's Linear do (simulator/layer_cost.cpp).
    const bool wgrad = w.requires_grad();
    ctx->save_for_backward({wgrad ? xc : torch::Tensor(), w});  // w: the parameter itself (see header)
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["compute_dtype"] = static_cast<int64_t>(dt);
    ctx->saved_data["into_grad"] = into_grad;
    return cpu::linear(xc, w.to(dt));  // (..., out)
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& xc = saved[0];
    const torch::Tensor& w = saved[1];
    const auto dt = static_cast<torch::ScalarType>(ctx->saved_data["compute_dtype"].toInt());
    const torch::Tensor gy = g[0].to(dt);
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0))
      dx = cpu::matmul(gy, w.to(dt)).to(static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt()));
    if (!ctx->needs_input_grad(1)) return {dx, dw, torch::Tensor()};  // frozen (LoRA base): no weight GEMM
    const torch::Tensor g2 = gy.reshape({-1, gy.size(-1)});           // (N, out)
    const torch::Tensor x2 = xc.reshape({-1, xc.size(-1)});           // (N, in)
    const bool into = ctx->saved_data["into_grad"].toBool();
    if (WeightGradStore& store = WeightGradStore::instance(); store.deferring()) {
      // A split backward's B: dW = gy^T x runs at the schedule's W (weight_grad_store.hpp).
      store.push([g2, x2, w, into] {
        torch::Tensor acc = w.grad();
        if (into && fp32_into(acc, g2)) cpu::addmm_(acc, g2.t(), x2);
        else accumulate_weight_grad(w, cpu::mm(g2.t(), x2).to(w.scalar_type()));
      });
      return {dx, torch::Tensor(), torch::Tensor()};
    }
    if (torch::Tensor acc = w.grad(); into && fp32_into(acc, g2)) {
      torch::NoGradGuard no_grad;
      cpu::addmm_(acc, g2.t(), x2);  // (out, in) += gy^T x, beta = 1
      return {dx, torch::Tensor(), torch::Tensor()};
    }
    dw = cpu::mm(g2.t(), x2).to(w.scalar_type());  // (out, in)
    return {dx, dw, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor zero_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool into_grad) {
  // (A bias is added outside: LibTorch 1.13 custom functions reject undefined inputs.)
  torch::Tensor y = ZeroLinear::apply(x, w, into_grad);
  return b.defined() ? y + b.to(y.scalar_type()) : y;
}

}  // namespace shardplan::executor
