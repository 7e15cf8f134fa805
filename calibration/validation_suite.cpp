// The built-in validation suite: tiny and small models that train on the 2-core development
// machine, one entry per layout family shardrun runs (validation.hpp).
#include "validation.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;

namespace {

ValidationEntry entry(std::string name, std::string model, int tp, int pp, int dp, int zero, int mbs, int gbs) {
  ValidationEntry e;
  e.name = std::move(name);
  e.model = std::move(model);
  e.tp = tp;
  e.pp = pp;
  e.dp = dp;
  e.zero_stage = zero;
  e.micro_batch_size = mbs;
  e.global_batch_size = gbs;
  return e;
}

sim::LoraConfig lora(int rank, double alpha, std::vector<std::string> targets) {
  sim::LoraConfig l;
  l.rank = rank;
  l.alpha = alpha;
  l.targets = std::move(targets);
  return l;
}

}  // namespace

std::vector<ValidationEntry> builtin_suite() {
  std::vector<ValidationEntry> s;
  s.push_back(entry("tiny-llama-1r", "tiny-llama", 1, 1, 1, 0, 4, 8));
  s.push_back(entry("tiny-llama-dp2-z0", "tiny-llama", 1, 1, 2, 0, 4, 8));
  s.push_back(entry("tiny-llama-dp2-z1", "tiny-llama", 1, 1, 2, 1, 4, 8));
  s.push_back(entry("tiny-llama-dp2-z2", "tiny-llama", 1, 1, 2, 2, 2, 8));
  s.push_back(entry("tiny-llama-dp2-z3", "tiny-llama", 1, 1, 2, 3, 2, 8));
  s.push_back(entry("tiny-llama-tp2", "tiny-llama", 2, 1, 1, 0, 4, 8));
  s.push_back(entry("tiny-llama-tp2-sp", "tiny-llama", 2, 1, 1, 0, 8, 16));
  s.back().sequence_parallel = true;
  s.push_back(entry("tiny-llama-lora8-dp2", "tiny-llama", 1, 1, 2, 0, 4, 8));
  s.back().lora = lora(8, 16, {"q_proj", "v_proj"});
  s.push_back(entry("tiny-gpt-1r", "tiny-gpt", 1, 1, 1, 0, 8, 8));
  s.back().precision = sim::Precision::bf16;
  s.push_back(entry("tiny-gpt-dp2-z2-bf16", "tiny-gpt", 1, 1, 2, 2, 4, 8));
  s.back().precision = sim::Precision::bf16;
  s.push_back(entry("tiny-gpt-dp2-z1-autocast", "tiny-gpt", 1, 1, 2, 1, 4, 8));
  s.back().precision = sim::Precision::bf16;
  s.back().mixed_precision = sim::MixedPrecision::autocast;
  s.push_back(entry("tiny-gpt-tp2-lora", "tiny-gpt", 2, 1, 1, 0, 4, 8));
  s.back().lora = lora(8, 16, {"c_attn"});
  s.push_back(entry("tiny-llama-tp2-dp2-z1", "tiny-llama", 2, 1, 2, 1, 2, 8));
  s.push_back(entry("gpt2-lora16-1r", "gpt2", 1, 1, 1, 0, 2, 2));
  s.back().lora = lora(16, 32, {"c_attn"});
  s.push_back(entry("gpt2-dp2-z3", "gpt2", 1, 1, 2, 3, 1, 2));
  s.push_back(entry("tiny-llama-pp2-1f1b", "tiny-llama", 1, 2, 1, 0, 2, 8));
  // Zero-bubble: B and a deferred W (the linears' weight gradients queued to the schedule's W).
  s.push_back(entry("tiny-llama-pp2-zb1p", "tiny-llama", 1, 2, 1, 0, 1, 8));
  s.back().schedule = sim::PipelineSchedule::zb1p;
  s.push_back(entry("tiny-llama-pp2-zbv", "tiny-llama", 1, 2, 1, 0, 1, 8));
  s.back().schedule = sim::PipelineSchedule::zbv;
  s.back().virtual_stages = 2;
  s.push_back(entry("tiny-llama-recompute-full", "tiny-llama", 1, 1, 1, 0, 4, 8));
  s.back().recompute = sim::Recompute::full;
  s.push_back(entry("tiny-gpt-pp2-gpipe", "tiny-gpt", 1, 2, 1, 0, 2, 8));
  s.back().schedule = sim::PipelineSchedule::gpipe;
  s.push_back(entry("tiny-gpt-recompute-selective", "tiny-gpt", 1, 1, 1, 0, 8, 8));
  s.back().recompute = sim::Recompute::selective;
  // Context parallelism: ring attention (causal load balancing) and Ulysses all-to-alls.
  s.push_back(entry("tiny-llama-cp2-ring", "tiny-llama", 1, 1, 1, 0, 4, 8));
  s.back().cp = 2;
  s.back().attention = sim::AttentionKind::flash;  // shardrun's ring steps: blockwise, O and the LSE kept
  s.push_back(entry("tiny-llama-cp2-a2a", "tiny-llama", 1, 1, 1, 0, 4, 8));
  s.back().cp = 2;
  s.back().cp_kind = sim::CpKind::all_to_all;
  // MoE: one rank, and experts split over two (dispatch and combine all-to-alls).
  s.push_back(entry("tiny-moe-1r", "tiny-moe", 1, 1, 1, 0, 4, 8));
  s.push_back(entry("tiny-moe-dp2-ep2-z1", "tiny-moe", 1, 1, 2, 1, 4, 8));
  s.back().ep = 2;
  // LoRA on the attention and on every expert's gate/up/down (PEFT suffix targets).
  s.push_back(entry("tiny-moe-lora8-dp2-ep2-z1", "tiny-moe", 1, 1, 2, 1, 4, 8));
  s.back().ep = 2;
  s.back().lora = lora(8, 16, {"q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"});
  // QLoRA: the NF4 base dequantised per use.
  s.push_back(entry("tiny-llama-qlora8-1r", "tiny-llama", 1, 1, 1, 0, 4, 8));
  s.back().lora = lora(8, 16, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  s.back().lora.base = sim::LoraBase::nf4;
  return s;
}

}  // namespace shardplan::calibration
