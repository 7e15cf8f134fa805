#include "host_overhead_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "executor/comm/mpi_communicator.hpp"
#include "executor/model/transformer.hpp"
#include "simulator/model_spec.hpp"
#include "timing_statistics.hpp"

namespace shardplan::executor {
namespace {

namespace sim = simulator;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSeq = 64;

// A built-in card cut down to micro shapes with `layers` blocks (MoE cards: `experts` routed
// experts, every block an MoE block).
sim::ModelSpec micro_card(const std::string& name, int layers, int experts) {
  nlohmann::json j = sim::to_card_json(sim::load_model(name));
  j["name"] = "micro-" + name;
  j["hidden_size"] = 32;
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = j["num_key_value_heads"].get<int>() < j["num_attention_heads"].get<int>() ? 2 : 4;
  j["head_dim"] = 8;
  if (j.contains("rotary_dim") && j["rotary_dim"].get<int>() > 0) j["rotary_dim"] = 8;
  j["ffn_hidden_size"] = 64;
  j["vocab_size"] = 64;
  j["num_layers"] = layers;
  if (j.contains("moe") && j["moe"].is_object()) {
    j["moe"]["num_experts"] = experts;
    j["moe"]["top_k"] = std::min<int>(2, experts);
    j["moe"]["expert_ffn_hidden_size"] = 32;
    if (j["moe"].value("shared_ffn_hidden_size", 0) > 0) j["moe"]["shared_ffn_hidden_size"] = 32;
    j["moe"]["first_dense_layers"] = 0;
  }
  return sim::model_from_json(j, "shardrun profile (micro card from " + name + ")");
}

class ModelTimer {
 public:
  explicit ModelTimer(const BenchContext& c) : c_(c), self_(MPI_COMM_SELF, "self", 60.0) {
    rng_.device = c.device;
    rng_.key = 1;
    ctx_.rng = &rng_;
    ctx_.tp = &self_;  // a tensor-parallel group of one, as training's tp = 1 has
  }

  // Seconds of one micro-batch's forward, and of its forward + backward, on the micro card.
  sim::PassSeconds time(const sim::ModelSpec& card, const sim::LoraConfig& lora = {}) {
    ModelOptions mo;
    mo.device = c_.device;
    mo.lora = lora;
    mo.fused_attention = false;
    Transformer model(card, mo);
    model.init_weights(1234);
    const auto ids_opts = torch::TensorOptions().dtype(torch::kLong).device(c_.device);
    const torch::Tensor ids = torch::randint(card.vocab_size, {1, kSeq}, ids_opts);
    const torch::Tensor labels = torch::randint(card.vocab_size, {1, kSeq}, ids_opts);
    torch::AutoGradMode grad_on(true);
    auto forward = [&] {
      rng_.reseed(0);
      return model.forward_chunk(0, ids, labels, ctx_, nullptr).loss_sum;
    };
    const double f = median([&] { (void)forward(); });
    const double fb = median([&] {
      forward().backward();
      for (auto& p : model.parameters())
        if (p.tensor.grad().defined()) p.tensor.mutable_grad().reset();
    });
    return {f, std::max(fb - f, 0.0)};
  }

 private:
  double median(const std::function<void()>& fn) {
    if (c_.stop_requested && c_.stop_requested()) throw ProfileInterrupted{};
    fn();
    std::vector<double> t;
    const double min_time = std::max(c_.min_time_s, c_.quick ? 0.01 : 0.1);
    const auto begin = Clock::now();
    while (t.size() < 5 || (std::chrono::duration<double>(Clock::now() - begin).count() < min_time && t.size() < 500)) {
      const auto s = Clock::now();
      fn();
      t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
    }
    const double m = upper_median(std::move(t));
    return c_.combine ? c_.combine(m) : m;
  }

  const BenchContext& c_;
  MpiCommunicator self_;
  DropoutRng rng_;
  TpContext ctx_;
};

sim::PassSeconds per(const sim::PassSeconds& more, const sim::PassSeconds& less, double count) {
  return {std::max(0.0, (more.forward - less.forward) / count), std::max(0.0, (more.backward - less.backward) / count)};
}

void report(const BenchContext& c, const char* part, const sim::PassSeconds& p) {
  if (!c.progress) return;
  char line[160];
  std::snprintf(line, sizeof line, "host overhead  %-13s forward %7.1f us  backward %7.1f us", part, p.forward * 1e6,
                p.backward * 1e6);
  c.progress(line);
}

}  // namespace

sim::HostOverhead bench_host_overhead(const BenchContext& ctx) {
  ModelTimer timer(ctx);
  sim::HostOverhead h;
  const sim::PassSeconds llama1 = timer.time(micro_card("tiny-llama", 1, 0));
  const sim::PassSeconds llama3 = timer.time(micro_card("tiny-llama", 3, 0));
  h.llama_block = per(llama3, llama1, 2);
  report(ctx, "llama_block", h.llama_block);
  h.gpt2_block = per(timer.time(micro_card("tiny-gpt", 3, 0)), timer.time(micro_card("tiny-gpt", 1, 0)), 2);
  report(ctx, "gpt2_block", h.gpt2_block);
  sim::LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  h.lora_adapter = per(timer.time(micro_card("tiny-llama", 3, 0), lora), llama3, 3.0 * 7);
  report(ctx, "lora_adapter", h.lora_adapter);
  const sim::PassSeconds moe1 = timer.time(micro_card("tiny-moe", 1, 2));
  const sim::PassSeconds moe3 = timer.time(micro_card("tiny-moe", 3, 2));
  h.moe_expert = per(timer.time(micro_card("tiny-moe", 3, 8)), moe3, 3.0 * 6);
  report(ctx, "moe_expert", h.moe_expert);
  const sim::PassSeconds layer = per(moe3, moe1, 2);
  h.moe_layer = {std::max(0.0, layer.forward - 2 * h.moe_expert.forward),
                 std::max(0.0, layer.backward - 2 * h.moe_expert.backward)};
  report(ctx, "moe_layer", h.moe_layer);
  h.measured = true;
  return h;
}

sim::HostOverhead median_of_passes(const std::vector<sim::HostOverhead>& passes) {
  sim::HostOverhead out = passes.at(0);
  for (sim::PassSeconds sim::HostOverhead::*part :
       {&sim::HostOverhead::llama_block, &sim::HostOverhead::gpt2_block, &sim::HostOverhead::moe_layer,
        &sim::HostOverhead::moe_expert, &sim::HostOverhead::lora_adapter})
    for (double sim::PassSeconds::*pass : {&sim::PassSeconds::forward, &sim::PassSeconds::backward}) {
      std::vector<double> v;
      for (const auto& p : passes) v.push_back(p.*part.*pass);
      out.*part.*pass = upper_median(std::move(v));
    }
  return out;
}

}  // namespace shardplan::executor
