// bare_libtorch_loop: the plainest LibTorch training loop for a shardplan model card.
//
// Reference point for "tokens/s of shardrun single-rank vs a bare LibTorch loop on the same
// model": decoder-only transformer (GPT-2 or Llama style, as the card says), explicit causal
// attention (LibTorch 1.13 has no SDPA), cross-entropy, AdamW (lr 3e-4, betas 0.9/0.95,
// weight decay 0.1, eps 1e-8), grad-norm clipping at 1.0, fp32, dropout 0, synthetic random
// tokens from a fixed seed. torch_loop.py is the same program in Python, module for module and
// parameter for parameter, so that both start from the same weights and data (same seed, same
// libtorch_cpu underneath) and print the same first loss.
//
// Usage: bare_libtorch_loop --model <card.json|name> [--seq-len 128] [--micro-batch 4]
//                           [--steps 30] [--warmup 5] [--threads 1] [--seed 1234] [--json]
// --steps counts all steps, warm-up included; the median is over the steps after --warmup.
#include <torch/torch.h>

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace F = torch::nn::functional;
using torch::Tensor;

struct Card {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t max_pos = 0, rotary_dim = 0, norms_per_layer = 2;
  bool swiglu = false, rmsnorm = false, rotary = false, tied = false, fused_qkv = false;
  bool parallel_residual = false, final_norm = true;
  bool bias_qkv = false, bias_out = false, bias_mlp = false, bias_lm_head = false;
};

Card load_card(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open model card " + path.string());
  const auto j = nlohmann::json::parse(in);
  if (j.value("kind", std::string("decoder")) != "decoder" || j.value("embedding_norm", false) ||
      j.value("mlm_head", false))
    throw std::runtime_error(path.string() + ": only decoder-only (causal LM) cards are supported");
  Card c;
  c.name = j.value("name", path.stem().string());
  c.layers = j.at("num_layers");
  c.hidden = j.at("hidden_size");
  c.heads = j.at("num_attention_heads");
  c.kv_heads = j.value("num_key_value_heads", c.heads);
  c.head_dim = j.value("head_dim", c.hidden / c.heads);
  c.ffn = j.at("ffn_hidden_size");
  c.vocab = j.at("vocab_size");
  c.max_pos = j.value("max_position_embeddings", int64_t{2048});
  c.swiglu = j.value("ffn_kind", std::string("gelu")) == "swiglu";
  c.rmsnorm = j.value("norm", std::string("layernorm")) == "rmsnorm";
  c.rotary = j.value("positional", std::string("learned")) == "rotary";
  c.rotary_dim = j.value("rotary_dim", c.head_dim);
  c.tied = j.value("tied_embeddings", false);
  c.fused_qkv = j.value("fused_qkv", false);
  c.parallel_residual = j.value("parallel_residual", false);
  c.norms_per_layer = j.value("norms_per_layer", int64_t{2});
  c.final_norm = j.value("final_norm", true);
  const auto bias = j.value("bias", nlohmann::json::object());
  c.bias_qkv = bias.value("qkv", false);
  c.bias_out = bias.value("out_proj", false);
  c.bias_mlp = bias.value("mlp", false);
  c.bias_lm_head = bias.value("lm_head", false);
  if (c.heads % c.kv_heads != 0 || c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    throw std::runtime_error(path.string() + ": inconsistent heads / kv heads / rotary_dim");
  return c;
}

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// LayerNorm (weight + bias) or RMSNorm (weight only), eps 1e-5 for both.
struct NormImpl : torch::nn::Module {
  NormImpl(int64_t dim, bool rms) : rms(rms) {
    weight = register_parameter("weight", torch::ones({dim}));
    if (!rms) bias = register_parameter("bias", torch::zeros({dim}));
  }
  Tensor forward(const Tensor& x) {
    if (rms) return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
    return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  }
  bool rms;
  double eps = 1e-5;
  Tensor weight, bias;
};
TORCH_MODULE(Norm);

Tensor rotate_half(const Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// RoPE (rotate-half, GPT-NeoX / Llama layout) on the first cos.size(-1) dims of each head.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const auto rot = cos.size(-1);
  if (rot == x.size(-1)) return x * cos + rotate_half(x) * sin;
  const auto xr = x.narrow(-1, 0, rot);
  return torch::cat({xr * cos + rotate_half(xr) * sin, x.narrow(-1, rot, x.size(-1) - rot)}, -1);
}

struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const Card& c)
      : heads(c.heads), kv_heads(c.kv_heads), head_dim(c.head_dim), fused(c.fused_qkv) {
    if (fused) {
      qkv = register_module("qkv", linear(c.hidden, (heads + 2 * kv_heads) * head_dim, c.bias_qkv));
    } else {
      q = register_module("q", linear(c.hidden, heads * head_dim, c.bias_qkv));
      k = register_module("k", linear(c.hidden, kv_heads * head_dim, c.bias_qkv));
      v = register_module("v", linear(c.hidden, kv_heads * head_dim, c.bias_qkv));
    }
    o = register_module("o", linear(heads * head_dim, c.hidden, c.bias_out));
  }
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask) {
    const auto B = x.size(0), T = x.size(1);
    Tensor qs, ks, vs;
    if (fused) {
      auto parts = qkv(x).split({heads * head_dim, kv_heads * head_dim, kv_heads * head_dim}, -1);
      qs = parts[0], ks = parts[1], vs = parts[2];
    } else {
      qs = q(x), ks = k(x), vs = v(x);
    }
    qs = qs.view({B, T, heads, head_dim}).transpose(1, 2);  // (B, nh, T, hd)
    ks = ks.view({B, T, kv_heads, head_dim}).transpose(1, 2);
    vs = vs.view({B, T, kv_heads, head_dim}).transpose(1, 2);
    if (cos.defined()) {
      qs = apply_rope(qs, cos, sin);
      ks = apply_rope(ks, cos, sin);
    }
    if (kv_heads != heads) {  // GQA: each kv head serves heads / kv_heads query heads
      ks = ks.repeat_interleave(heads / kv_heads, 1);
      vs = vs.repeat_interleave(heads / kv_heads, 1);
    }
    auto att = torch::matmul(qs, ks.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
    att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
    auto y = torch::matmul(att, vs).transpose(1, 2).reshape({B, T, heads * head_dim});
    return o(y);
  }
  int64_t heads, kv_heads, head_dim;
  bool fused;
  torch::nn::Linear qkv{nullptr}, q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(const Card& c) : swiglu(c.swiglu) {
    if (swiglu) {
      gate = register_module("gate", linear(c.hidden, c.ffn, c.bias_mlp));
      up = register_module("up", linear(c.hidden, c.ffn, c.bias_mlp));
      down = register_module("down", linear(c.ffn, c.hidden, c.bias_mlp));
    } else {
      fc_in = register_module("fc_in", linear(c.hidden, c.ffn, c.bias_mlp));
      fc_out = register_module("fc_out", linear(c.ffn, c.hidden, c.bias_mlp));
    }
  }
  Tensor forward(const Tensor& x) {
    if (swiglu) return down(torch::silu(gate(x)) * up(x));
    return fc_out(torch::gelu(fc_in(x), "tanh"));  // GPT-2's gelu_new
  }
  bool swiglu;
  torch::nn::Linear gate{nullptr}, up{nullptr}, down{nullptr}, fc_in{nullptr}, fc_out{nullptr};
};
TORCH_MODULE(Mlp);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Card& c)
      : parallel(c.parallel_residual), shared_norm(c.parallel_residual && c.norms_per_layer == 1) {
    norm1 = register_module("norm1", Norm(c.hidden, c.rmsnorm));
    attn = register_module("attn", Attention(c));
    if (!shared_norm) norm2 = register_module("norm2", Norm(c.hidden, c.rmsnorm));
    mlp = register_module("mlp", Mlp(c));
  }
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask) {
    if (parallel) {  // GPT-J / NeoX: x + attn(ln1(x)) + mlp(ln2(x)); GPT-J shares ln1
      const auto h = norm1(x);
      return x + attn(h, cos, sin, mask) + mlp(shared_norm ? h : norm2(x));
    }
    const auto h = x + attn(norm1(x), cos, sin, mask);
    return h + mlp(norm2(h));
  }
  bool parallel, shared_norm;
  Norm norm1{nullptr}, norm2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const Card& c) : card(c) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab, c.hidden));
    if (!c.rotary) wpe = register_module("wpe", torch::nn::Embedding(c.max_pos, c.hidden));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(Block(c));
    if (c.final_norm) norm_f = register_module("norm_f", Norm(c.hidden, c.rmsnorm));
    if (!c.tied) lm_head = register_module("lm_head", linear(c.hidden, c.vocab, c.bias_lm_head));
    if (c.rotary) {
      const auto inv_freq = 1.0 / torch::pow(10000.0, torch::arange(0, c.rotary_dim, 2, torch::kFloat) / c.rotary_dim);
      const auto freqs = torch::outer(torch::arange(c.max_pos, torch::kFloat), inv_freq);
      const auto emb = torch::cat({freqs, freqs}, -1);
      rope_cos = register_buffer("rope_cos", emb.cos());
      rope_sin = register_buffer("rope_sin", emb.sin());
    }
  }
  Tensor forward(const Tensor& idx) {
    const auto T = idx.size(1);
    auto x = wte(idx);
    if (!card.rotary) x = x + wpe(torch::arange(T, idx.options()));
    Tensor cos, sin;
    if (card.rotary) cos = rope_cos.narrow(0, 0, T), sin = rope_sin.narrow(0, 0, T);
    const auto mask = torch::ones({T, T}, torch::kBool).triu(1);  // true above the diagonal
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x, cos, sin, mask);
    if (card.final_norm) x = norm_f(x);
    if (card.tied) return F::linear(x, wte->weight);
    return lm_head(x);
  }
  Card card;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  Norm norm_f{nullptr};
  torch::nn::Linear lm_head{nullptr};
  Tensor rope_cos, rope_sin;
};
TORCH_MODULE(Transformer);

// GPT-2 style init, in named_parameters() order (torch_loop.py does the same, in the same order):
// matrices N(0, 0.02), biases 0, norm weights 1.
void init_weights(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    if (p.value().dim() >= 2) {
      p.value().normal_(0.0, 0.02);
    } else if (p.key().ends_with("bias")) {
      p.value().zero_();
    } else {
      p.value().fill_(1.0);
    }
  }
}

// OpenBLAS keeps its own pool; torch::set_num_threads does not reach it (shared/README §1).
int set_openblas_threads(int threads) {
  using setter_t = void (*)(int);
  using getter_t = int (*)();
  auto set = reinterpret_cast<setter_t>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<getter_t>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set == nullptr || get == nullptr) return -1;  // not OpenBLAS (e.g. the reference BLAS)
  set(threads);
  return get();
}

struct Args {
  std::string model;
  int64_t seq_len = 128, micro_batch = 4, steps = 30, warmup = 5, seed = 1234;
  int threads = 1;
  bool json = false;
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "error: " << error << "\n"
            << "usage: bare_libtorch_loop --model <card.json|name> [--seq-len 128] "
               "[--micro-batch 4] [--steps 30] [--warmup 5] [--threads 1] [--seed 1234] [--json]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      a.json = true;
      continue;
    }
    if (flag == "-h" || flag == "--help") usage("help requested");
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string value = argv[++i];
    auto number = [&]() -> int64_t {
      try {
        std::size_t used = 0;
        const auto n = std::stoll(value, &used);
        if (used == value.size() && n >= 0) return n;
      } catch (const std::exception&) {}
      usage("bad value for " + flag + ": " + value);
    };
    if (flag == "--model") a.model = value;
    else if (flag == "--seq-len") a.seq_len = number();
    else if (flag == "--micro-batch") a.micro_batch = number();
    else if (flag == "--steps") a.steps = number();
    else if (flag == "--warmup") a.warmup = number();
    else if (flag == "--threads") a.threads = static_cast<int>(number());
    else if (flag == "--seed") a.seed = number();
    else usage("unknown option " + flag);
  }
  if (a.model.empty()) usage("--model is required");
  if (a.seq_len < 1 || a.micro_batch < 1 || a.threads < 1) usage("sizes and threads must be >= 1");
  if (a.steps <= a.warmup) usage("--steps (warm-up included) must exceed --warmup");
  return a;
}

// A path to a card, or a card name looked up in $SHARDPLAN_DATA_DIR/models, then the source tree.
std::filesystem::path resolve_card(const std::string& model) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(model)) return model;
  std::vector<fs::path> dirs;
  if (const char* data = std::getenv("SHARDPLAN_DATA_DIR")) dirs.emplace_back(fs::path(data) / "models");
#ifdef SHARDPLAN_REFERENCE_MODELS_DIR
  dirs.emplace_back(SHARDPLAN_REFERENCE_MODELS_DIR);
#endif
  for (const auto& dir : dirs)
    if (fs::is_regular_file(dir / (model + ".json"))) return dir / (model + ".json");
  throw std::runtime_error("no model card " + model);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(argc, argv);
  at::set_num_interop_threads(1);  // before any parallel work
  torch::set_num_threads(args.threads);
  const int blas_threads = set_openblas_threads(args.threads);

  const Card card = load_card(resolve_card(args.model));
  if (args.seq_len > card.max_pos) usage("--seq-len exceeds max_position_embeddings");

  torch::manual_seed(static_cast<uint64_t>(args.seed));
  Transformer model(card);
  init_weights(*model);
  model->train();
  const auto params = model->parameters();
  int64_t n_params = 0;
  for (const auto& p : params) n_params += p.numel();

  // Synthetic data: fresh random tokens for every step, drawn up front from the same generator.
  const auto tokens = torch::randint(card.vocab, {args.steps, args.micro_batch, args.seq_len + 1}, torch::kLong);
  torch::optim::AdamW opt(
      params, torch::optim::AdamWOptions(3e-4).betas(std::make_tuple(0.9, 0.95)).eps(1e-8).weight_decay(0.1));

  std::vector<double> step_s;
  double loss_first = 0.0, loss_last = 0.0;
  for (int64_t step = 0; step < args.steps; ++step) {
    const auto batch = tokens[step];
    const auto input = batch.narrow(1, 0, args.seq_len);
    const auto target = batch.narrow(1, 1, args.seq_len);
    const auto t0 = std::chrono::steady_clock::now();
    const auto logits = model->forward(input);
    const auto loss = F::cross_entropy(logits.reshape({-1, card.vocab}), target.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    opt.step();
    const double loss_value = loss.item<double>();
    const auto t1 = std::chrono::steady_clock::now();
    if (step == 0) loss_first = loss_value;
    loss_last = loss_value;
    if (step >= args.warmup) step_s.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(step_s.begin(), step_s.end());
  const auto n = step_s.size();
  const double median = n % 2 == 1 ? step_s[n / 2] : 0.5 * (step_s[n / 2 - 1] + step_s[n / 2]);
  const double tokens_per_s = static_cast<double>(args.micro_batch * args.seq_len) / median;

  if (args.json) {
    const nlohmann::json out = {{"impl", "bare_libtorch"},
                                {"model", card.name},
                                {"tokens_per_second", tokens_per_s},
                                {"step_seconds_median", median},
                                {"parameters", n_params},
                                {"threads", args.threads},
                                {"seq_len", args.seq_len},
                                {"micro_batch", args.micro_batch},
                                {"steps", args.steps},
                                {"warmup", args.warmup},
                                {"openblas_threads", blas_threads},
                                {"loss_first", loss_first},
                                {"loss_last", loss_last},
                                {"torch_version", TORCH_VERSION}};
    std::cout << out.dump() << "\n";
  } else {
    std::printf("bare_libtorch  model %s  parameters %lld  threads %d (openblas %d)\n", card.name.c_str(),
                static_cast<long long>(n_params), args.threads, blas_threads);
    std::printf("seq_len %lld  micro_batch %lld  steps %lld (warm-up %lld)  loss %.4f -> %.4f\n",
                static_cast<long long>(args.seq_len), static_cast<long long>(args.micro_batch),
                static_cast<long long>(args.steps), static_cast<long long>(args.warmup), loss_first, loss_last);
    std::printf("median step %.4f s  tokens/s %.1f\n", median, tokens_per_s);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bare_libtorch_loop: " << e.what() << "\n";
  return 1;
}
