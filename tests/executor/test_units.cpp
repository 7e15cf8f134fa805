// In-process checks of the executor's building blocks (no MPI: a one-rank communicator).
#include <gtest/gtest.h>

#include "executor/engine/loss_scaler.hpp"
#include "executor/engine/lr_schedule.hpp"
#include "executor/metrics/memory_accounting.hpp"
#include "executor/metrics/run_report.hpp"
#include "executor/model/parameter.hpp"
#include "executor/parallel/layers.hpp"
#include "executor/parallel/sp_column_linear.hpp"
#include "executor/parallel/zero_linear.hpp"

namespace shardplan::executor {
namespace units_test {  // named, not anonymous: the files share a unity-build unit

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() / b.to(torch::kDouble).abs().max()).item<double>();
}

// A group of one rank: collectives are copies.
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "self"; }
  const std::string& name() const override { return name_; }
  void all_reduce(torch::Tensor&, ReduceOp) override {}
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override { out.copy_(in.view(out.sizes())); }
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in) override { out.copy_(in.view(out.sizes())); }
  void broadcast(torch::Tensor&, int) override {}
  void send(const torch::Tensor&, int) override {}
  void recv(torch::Tensor&, int) override {}
  void barrier() override {}
  std::unique_ptr<Work> all_reduce_async(torch::Tensor) override { return nullptr; }
  std::unique_ptr<Work> reduce_scatter_async(torch::Tensor, torch::Tensor) override { return nullptr; }
  std::unique_ptr<Work> all_gather_async(torch::Tensor, torch::Tensor) override { return nullptr; }
  std::unique_ptr<Work> send_async(torch::Tensor, int, int) override { return nullptr; }
  std::unique_ptr<Work> recv_async(torch::Tensor, int, int) override { return nullptr; }

 private:
  std::string name_ = "self";
};

TEST(ShardSpec, FusedSegmentsAreCutPerSegmentAndMergeBack) {
  // A fused [q; k; v] output dim of sizes 4, 2, 2: rank r of 2 holds [q_r; k_r; v_r].
  const torch::Tensor full = torch::arange(8 * 3, torch::kFloat).view({8, 3});
  const ShardSpec spec{0, {4, 2, 2}, 0};
  const torch::Tensor r0 = take_shard(full, spec, 0, 2), r1 = take_shard(full, spec, 1, 2);
  EXPECT_TRUE(torch::equal(r0, torch::cat({full.narrow(0, 0, 2), full.narrow(0, 4, 1), full.narrow(0, 6, 1)})));
  EXPECT_TRUE(torch::equal(r1, torch::cat({full.narrow(0, 2, 2), full.narrow(0, 5, 1), full.narrow(0, 7, 1)})));
  EXPECT_TRUE(torch::equal(merge_shards({r0, r1}, spec, {8, 3}), full));
}

TEST(ShardSpec, PaddedVocabularyRoundTrips) {
  const torch::Tensor full = torch::randn({5, 4});
  const ShardSpec spec{0, {}, 6};  // 5 rows padded to 6 for tp = 2
  const torch::Tensor r1 = take_shard(full, spec, 1, 2);
  EXPECT_EQ(r1.size(0), 3);
  EXPECT_EQ(r1[2].abs().sum().item<float>(), 0.0f);  // the padding row
  EXPECT_TRUE(torch::equal(merge_shards({take_shard(full, spec, 0, 2), r1}, spec, {5, 4}), full));
}

TEST(ZeroLinear, GradientsMatchAtenLinear) {
  torch::manual_seed(0);
  const torch::Tensor x0 = torch::randn({2, 5, 6}, torch::kDouble), w0 = torch::randn({4, 6}, torch::kDouble),
                      b0 = torch::randn({4}, torch::kDouble);
  auto x1 = x0.clone().requires_grad_(), w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
  auto x2 = x0.clone().requires_grad_(), w2 = w0.clone().requires_grad_(), b2 = b0.clone().requires_grad_();
  const torch::Tensor g = torch::randn({2, 5, 4}, torch::kDouble);
  (zero_linear(x1, w1, b1) * g).sum().backward();
  (torch::nn::functional::linear(x2, w2, b2) * g).sum().backward();
  EXPECT_TRUE(torch::allclose(x1.grad(), x2.grad()));
  EXPECT_TRUE(torch::allclose(w1.grad(), w2.grad()));
  EXPECT_TRUE(torch::allclose(b1.grad(), b2.grad()));
}

// into_grad (gradient accumulation fusion): the weight gradient is added into the flat buffer's
// view inside the GEMM, across micro-batches, and no fresh gradient tensor is made for it; the
// parameter's AccumulateGrad hook still fires once per backward. Without a .grad, or in a 16-bit
// compute dtype, the gradient comes back as before.
TEST(ZeroLinear, IntoGradAddsTheWeightGradientIntoTheFlatBufferInsideTheGemm) {
  torch::manual_seed(4);
  const torch::Tensor x0 = torch::randn({2, 5, 6}), w0 = torch::randn({4, 6}), g = torch::randn({2, 5, 4});
  const torch::Tensor flat = torch::randn({4 * 6 + 2});
  const torch::Tensor before = flat.narrow(0, 0, 24).view({4, 6}).clone();
  auto w = w0.clone().requires_grad_();
  w.mutable_grad() = flat.narrow(0, 0, 24).view({4, 6});
  int hooks = 0;
  w.register_hook([&](const torch::Tensor&) { ++hooks; });
  struct Count final : torch::autograd::FunctionPostHook {
    int* n;
    explicit Count(int* c) : n(c) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& out,
                                              const torch::autograd::variable_list&) override {
      ++*n;
      return out;
    }
  };
  int post = 0;  // ZeroEngine's GradReadyHook is an AccumulateGrad post-hook
  const auto acc = torch::autograd::impl::grad_accumulator(w);
  acc->add_post_hook(std::make_unique<Count>(&post));
  auto x = x0.clone().requires_grad_();
  for (int mb = 0; mb < 2; ++mb) (zero_linear(x, w, {}, /*into_grad=*/true) * g).sum().backward();
  const torch::Tensor dw = torch::matmul(g.reshape({-1, 4}).t(), x0.reshape({-1, 6}));  // one micro-batch's
  EXPECT_EQ(w.grad().data_ptr(), flat.data_ptr());
  EXPECT_LT(((w.grad() - before) - 2 * dw).abs().max().item<float>(), 1e-4F);
  EXPECT_TRUE(torch::allclose(x.grad(), 2 * torch::matmul(g, w0), 1e-5, 1e-5));
  EXPECT_EQ(hooks, 0) << "no gradient tensor for the weight: its tensor hooks see none";
  EXPECT_EQ(post, 2) << "AccumulateGrad still runs once per backward";
  // No .grad to add into (ZeRO 2/3): the gradient, as without the flag.
  auto fresh = w0.clone().requires_grad_();
  (zero_linear(x0, fresh, {}, /*into_grad=*/true) * g).sum().backward();
  EXPECT_TRUE(torch::allclose(fresh.grad(), dw, 1e-5, 1e-5));
}

// Bytes a linear keeps alive for backward beyond its output, and the input's gradient: `linear`
// applied to a non-leaf input that lives on only if the linear saves it.
template <typename Linear>
int64_t bytes_kept_for_backward(Linear&& linear, const torch::Tensor& x0, const torch::Tensor& g, torch::Tensor& dx) {
  install_memory_accounting();
  const int64_t before = current_tensor_bytes();
  torch::Tensor y;
  {
    const torch::Tensor x = x0 * 2.0;  // scalar multiply: its backward saves nothing
    y = linear(x);
  }
  const int64_t kept = current_tensor_bytes() - before - y.numel() * y.element_size();
  dx = torch::autograd::grad({(y * g).sum()}, {x0})[0];
  return kept;
}

// A frozen weight (the LoRA base) keeps no input for backward, a trainable one exactly its
// input, as PyTorch's mm and TE's Linear do; the simulator counts the same (kept_linear_inputs).
TEST(ZeroLinear, AFrozenWeightKeepsNoInput) {
  torch::manual_seed(0);
  const torch::Tensor x0 = torch::randn({2, 64, 32}).requires_grad_(), w0 = torch::randn({16, 32});
  const torch::Tensor g = torch::randn({2, 64, 16});
  const int64_t x_bytes = x0.numel() * x0.element_size();
  torch::Tensor dx_frozen, dx_trained;
  const torch::Tensor frozen = w0.clone(), trained = w0.clone().requires_grad_();
  EXPECT_EQ(bytes_kept_for_backward([&](const torch::Tensor& x) { return zero_linear(x, frozen); }, x0, g, dx_frozen),
            0);
  EXPECT_EQ(bytes_kept_for_backward([&](const torch::Tensor& x) { return zero_linear(x, trained); }, x0, g, dx_trained),
            x_bytes);
  EXPECT_TRUE(torch::allclose(dx_frozen, dx_trained));
  // Against a float64 product (the fp32 GEMM's rounding is oneDNN's or OpenBLAS's: cpu_gemm.hpp).
  const torch::Tensor ref = 2.0 * torch::matmul(g.to(torch::kDouble), w0.to(torch::kDouble));
  EXPECT_LE((dx_frozen.to(torch::kDouble) - ref).abs().max().item<double>(), 1e-5 * ref.abs().max().item<double>());
}

// The sequence-parallel column linears keep their local input only when some weight trains.
TEST(SpColumnLinears, FrozenWeightsKeepNoInput) {
  torch::manual_seed(0);
  SelfCommunicator tp;
  const torch::Tensor x0 = torch::randn({2, 64, 32}).requires_grad_(), w0 = torch::randn({16, 32});
  const torch::Tensor g = torch::randn({2, 64, 16});
  torch::Tensor dx_frozen, dx_trained;
  const torch::Tensor frozen = w0.clone(), trained = w0.clone().requires_grad_();
  auto sp = [&](const torch::Tensor& w) {
    return [&tp, w](const torch::Tensor& x) { return sp_column_linears(x, {w}, tp)[0]; };
  };
  EXPECT_EQ(bytes_kept_for_backward(sp(frozen), x0, g, dx_frozen), 0);
  EXPECT_EQ(bytes_kept_for_backward(sp(trained), x0, g, dx_trained), x0.numel() * x0.element_size());
  EXPECT_TRUE(torch::allclose(dx_frozen, dx_trained));
}

TEST(VocabEmbedding, RowsIntoGradAddToTheFlatGradientAsTheDenseBackwardWould) {
  SelfCommunicator self;
  TpContext ctx;
  ctx.tp = &self;
  torch::manual_seed(3);
  const int64_t V = 12, H = 5;
  const torch::Tensor w0 = torch::randn({V, H});
  // Repeated ids (their rows' gradients sum), and two micro-batches accumulating.
  const torch::Tensor ids = torch::tensor({{3, 7, 3}, {0, 11, 3}}, torch::kLong);
  const torch::Tensor dy = torch::randn({2, 3, H});
  for (const int64_t valid : {V, V - 2}) {  // whole table; padded rows (the masked path)
    VocabEmbedding ref{w0.clone().requires_grad_(), 0, valid};
    VocabEmbedding ours{w0.clone().requires_grad_(), 0, valid};
    ours.rows_into_grad = true;
    // ZeRO 0/1: .grad is a view of the unit's flat buffer, holding what earlier micro-batches added.
    const torch::Tensor flat = torch::randn({V * H + 3});
    const torch::Tensor before = flat.narrow(0, 0, V * H).view({V, H}).clone();
    ours.weight.mutable_grad() = flat.narrow(0, 0, V * H).view({V, H});
    for (int mb = 0; mb < 2; ++mb) {
      ref.forward(ids, ctx).backward(dy);
      ours.forward(ids, ctx).backward(dy);
    }
    EXPECT_EQ(ours.weight.grad().data_ptr(), flat.data_ptr()) << "still the flat buffer's view";
    EXPECT_LT(max_rel(ours.weight.grad() - before, ref.weight.grad()), 1e-6) << valid;
    EXPECT_EQ(ref.weight.grad()[1].abs().sum().item<float>(), 0.0F) << "untouched rows";
    // Without a .grad to add into (ZeRO 2/3 hand gradients over as autograd makes them): the dense one.
    VocabEmbedding fresh{w0.clone().requires_grad_(), 0, valid};
    fresh.rows_into_grad = true;
    fresh.forward(ids, ctx).backward(dy);
    ref.weight.mutable_grad().reset();
    ref.forward(ids, ctx).backward(dy);
    EXPECT_LT(max_rel(fresh.weight.grad(), ref.weight.grad()), 1e-6) << valid;
  }
}

TEST(VocabParallelCrossEntropy, OneRankMatchesTorchCrossEntropyAndItsGradient) {
  SelfCommunicator self;
  torch::manual_seed(1);
  const torch::Tensor logits0 = torch::randn({6, 10});
  torch::Tensor targets = torch::randint(0, 10, {6}, torch::kLong);
  targets[2] = -100;
  auto a = logits0.clone().requires_grad_(), b = logits0.clone().requires_grad_();
  const torch::Tensor ours = vocab_parallel_cross_entropy(a, targets, 0, 10, self);
  const torch::Tensor ref = torch::nn::functional::cross_entropy(
      b, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(-100));
  EXPECT_TRUE(torch::allclose(ours, ref, 1e-5, 1e-6));
  ours.sum().backward();
  ref.sum().backward();
  EXPECT_TRUE(torch::allclose(a.grad(), b.grad(), 1e-5, 1e-6));
}

TEST(VocabParallelCrossEntropy, PaddedColumnsNeverWin) {
  SelfCommunicator self;
  torch::Tensor logits = torch::zeros({1, 4});
  logits[0][3] = 100.0;  // a padding column (valid = 3) with a huge logit
  const torch::Tensor loss = vocab_parallel_cross_entropy(logits, torch::tensor({0}, torch::kLong), 0, 3, self);
  EXPECT_NEAR(loss.item<float>(), std::log(3.0), 1e-5);
}

// The fused fp32 path (cpu_kernels.hpp) over a padded vocabulary shard (V 37, 33 real) with
// ignored targets and a weighted loss: loss and gradient against log_softmax in double.
TEST(FusedCrossEntropy, MatchesLogSoftmaxAndItsGradientWithPaddingAndIgnoredRows) {
  torch::manual_seed(11);
  const int64_t N = 19, V = 37, valid = 33;
  torch::Tensor targets = torch::randint(0, valid, {N}, torch::kLong);
  targets[3] = -100;
  targets[11] = -100;
  const torch::Tensor z0 = torch::randn({N, V}) * 3;
  const torch::Tensor dl = torch::rand({N});
  SelfCommunicator self;
  const torch::Tensor z = z0.clone().requires_grad_();
  const torch::Tensor loss = vocab_parallel_cross_entropy(z, targets, 0, valid, self);
  (loss * dl).sum().backward();
  const torch::Tensor zr = z0.narrow(1, 0, valid).to(torch::kDouble).requires_grad_();
  const torch::Tensor keep = targets.ne(-100);
  const torch::Tensor lr =
      -torch::log_softmax(zr, 1).gather(1, targets.clamp_min(0).unsqueeze(1)).squeeze(1) * keep.to(torch::kDouble);
  (lr * dl.to(torch::kDouble)).sum().backward();
  EXPECT_LT(max_rel(loss.detach(), lr.detach()), 1e-6);
  EXPECT_LT(max_rel(z.grad().narrow(1, 0, valid), zr.grad()), 1e-6);
  EXPECT_EQ(z.grad().narrow(1, valid, V - valid).abs().sum().item<float>(), 0.0F);  // padded columns
  EXPECT_EQ(z.grad()[3].abs().sum().item<float>(), 0.0F);                           // ignored rows
  // bf16 logits take the op-by-op form: the same loss and gradient to bf16 rounding.
  const torch::Tensor zb = z0.to(torch::kBFloat16).requires_grad_();
  const torch::Tensor lb = vocab_parallel_cross_entropy(zb, targets, 0, valid, self);
  (lb * dl).sum().backward();
  EXPECT_LT(max_rel(lb.detach(), lr.detach()), 2e-2);
  EXPECT_LT(max_rel(zb.grad().narrow(1, 0, valid), zr.grad()), 2e-2);
}

TEST(LrSchedule, WarmsUpThenDecaysToTheFloor) {
  const LrSchedule s{1e-3, 1e-4, 4, 20};
  EXPECT_DOUBLE_EQ(s.at(0), 2.5e-4);
  EXPECT_DOUBLE_EQ(s.at(3), 1e-3);
  EXPECT_GT(s.at(10), s.at(11));
  EXPECT_NEAR(s.at(19), 1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI * 15.0 / 16.0)), 1e-12);
  EXPECT_NEAR(s.at(40), 1e-4, 1e-12);
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterAnInterval) {
  LossScaler s;
  s.enabled = true;
  s.scale = 1024;
  s.growth_interval = 3;
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale, 512);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale, 512);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale, 1024);
  LossScaler off;
  EXPECT_EQ(off.loss_multiplier(), 1.0);
}

TEST(MemoryAccounting, CountsTensorBytesExactly) {
  install_memory_accounting();
  const int64_t before = current_tensor_bytes();
  {
    torch::Tensor t = torch::empty({1 << 18}, torch::kFloat);  // 1 MiB
    EXPECT_EQ(current_tensor_bytes() - before, 1 << 20);
    reset_peak_tensor_bytes();
    torch::Tensor u = torch::empty({1 << 16}, torch::kDouble);  // 0.5 MiB more
    EXPECT_EQ(peak_tensor_bytes() - before, (1 << 20) + (1 << 19));
  }
  EXPECT_EQ(current_tensor_bytes(), before);
}

// A run's first quarter of steps (at least the first) is warm-up and stays out of the medians:
// eight steps whose first two are slow report the steady time, three steps skip one, two none.
TEST(RunReport, TheFirstQuarterOfTheStepsIsWarmUp) {
  auto report = [](const std::vector<double>& times) {
    ReportInputs in;
    for (size_t i = 0; i < times.size(); ++i) {
      StepRecord r;
      r.step = static_cast<int64_t>(i) + 1;
      r.step_s = r.compute_s = times[i];
      r.tokens = 100;
      in.steps.push_back(r);
    }
    in.peak_bytes_per_rank = {1};
    return build_report(in).at("measured");
  };
  const nlohmann::json eight = report({9.0, 3.0, 2.5, 1.0, 1.1, 0.9, 1.0, 1.2});
  EXPECT_EQ(eight.at("steps_in_medians").get<int>(), 6);
  EXPECT_DOUBLE_EQ(eight.at("step_seconds").get<double>(), 1.05);  // median of steps 3-8: 2.5 left in
  const nlohmann::json twelve = report({9.0, 3.0, 2.5, 1.0, 1.1, 0.9, 1.0, 1.2, 1.0, 0.9, 1.1, 1.0});
  EXPECT_EQ(twelve.at("steps_in_medians").get<int>(), 9);
  EXPECT_DOUBLE_EQ(twelve.at("step_seconds").get<double>(), 1.0);
  EXPECT_EQ(report({5.0, 1.0, 2.0}).at("steps_in_medians").get<int>(), 2);
  EXPECT_DOUBLE_EQ(report({5.0, 1.0}).at("step_seconds").get<double>(), 3.0);  // too few to skip
}

}  // namespace units_test
}  // namespace shardplan::executor
