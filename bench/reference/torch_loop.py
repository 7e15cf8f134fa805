#!/usr/bin/python3
"""torch_loop.py: the plainest PyTorch training loop for a shardplan model card.

Python twin of bare_libtorch_loop.cpp (same modules, same parameter order, same init, same
seed, same synthetic data, same optimizer and clipping), for "tokens/s of shardrun single-rank
vs the Debian python3-torch equivalent". Run it with Debian's interpreter, which has torch 1.13:

    /usr/bin/python3 bench/reference/torch_loop.py --model models/tiny-gpt.json --threads 1 [--json]

--steps counts all steps, warm-up included; the median is over the steps after --warmup.

Threads: OpenBLAS sizes its pool when the library loads (with `import torch`) and
torch.set_num_threads does not reach it, so OPENBLAS_NUM_THREADS is set from --threads in
os.environ *before* torch is imported (the import is deliberately below the argument parsing).
A value already in the environment is overwritten. After the import, openblas_set_num_threads
is also called through ctypes when the loaded BLAS is OpenBLAS, and the count is reported.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model card JSON path, or a card name in models/")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=30, help="all steps, warm-up included")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", action="store_true", help="print one JSON line")
    a = p.parse_args()
    if min(a.seq_len, a.micro_batch, a.threads) < 1 or a.warmup < 0:
        p.error("sizes and threads must be >= 1")
    if a.steps <= a.warmup:
        p.error("--steps (warm-up included) must exceed --warmup")
    return a


ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)  # must precede `import torch`

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def set_openblas_threads(threads):
    """Returns OpenBLAS's thread count after setting it, or -1 when the BLAS is not OpenBLAS."""
    for name in (None, "libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(name)  # an already loaded library: same handle, no second copy
            lib.openblas_set_num_threads(ctypes.c_int(threads))
            return int(lib.openblas_get_num_threads())
        except (OSError, AttributeError):
            continue
    return -1


def resolve_card(model):
    if Path(model).is_file():
        return Path(model)
    dirs = []
    if os.environ.get("SHARDPLAN_DATA_DIR"):
        dirs.append(Path(os.environ["SHARDPLAN_DATA_DIR"]) / "models")
    dirs.append(Path(__file__).resolve().parent.parent.parent / "models")
    for d in dirs:
        if (d / f"{model}.json").is_file():
            return d / f"{model}.json"
    sys.exit(f"torch_loop.py: no model card {model}")


class Card:
    def __init__(self, path):
        j = json.loads(Path(path).read_text())
        if j.get("kind", "decoder") != "decoder" or j.get("embedding_norm") or j.get("mlm_head"):
            sys.exit(f"torch_loop.py: {path}: only decoder-only (causal LM) cards are supported")
        self.name = j.get("name", Path(path).stem)
        self.layers = j["num_layers"]
        self.hidden = j["hidden_size"]
        self.heads = j["num_attention_heads"]
        self.kv_heads = j.get("num_key_value_heads", self.heads)
        self.head_dim = j.get("head_dim", self.hidden // self.heads)
        self.ffn = j["ffn_hidden_size"]
        self.vocab = j["vocab_size"]
        self.max_pos = j.get("max_position_embeddings", 2048)
        self.swiglu = j.get("ffn_kind", "gelu") == "swiglu"
        self.rmsnorm = j.get("norm", "layernorm") == "rmsnorm"
        self.rotary = j.get("positional", "learned") == "rotary"
        self.rotary_dim = j.get("rotary_dim", self.head_dim)
        self.tied = j.get("tied_embeddings", False)
        self.fused_qkv = j.get("fused_qkv", False)
        self.parallel_residual = j.get("parallel_residual", False)
        self.norms_per_layer = j.get("norms_per_layer", 2)
        self.final_norm = j.get("final_norm", True)
        bias = j.get("bias", {})
        self.bias_qkv = bias.get("qkv", False)
        self.bias_out = bias.get("out_proj", False)
        self.bias_mlp = bias.get("mlp", False)
        self.bias_lm_head = bias.get("lm_head", False)
        if self.heads % self.kv_heads or self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
            sys.exit(f"torch_loop.py: {path}: inconsistent heads / kv heads / rotary_dim")


class Norm(nn.Module):
    """LayerNorm (weight + bias) or RMSNorm (weight only), eps 1e-5 for both."""

    def __init__(self, dim, rms):
        super().__init__()
        self.rms, self.eps = rms, 1e-5
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = None if rms else nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        if self.rms:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return F.layer_norm(x, (x.size(-1),), self.weight, self.bias, self.eps)


def rotate_half(x):
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):
    """RoPE (rotate-half, GPT-NeoX / Llama layout) on the first cos.size(-1) dims of each head."""
    rot = cos.size(-1)
    if rot == x.size(-1):
        return x * cos + rotate_half(x) * sin
    xr = x[..., :rot]
    return torch.cat((xr * cos + rotate_half(xr) * sin, x[..., rot:]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.fused = c.heads, c.kv_heads, c.head_dim, c.fused_qkv
        if self.fused:
            self.qkv = nn.Linear(c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim, bias=c.bias_qkv)
        else:
            self.q = nn.Linear(c.hidden, c.heads * c.head_dim, bias=c.bias_qkv)
            self.k = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=c.bias_qkv)
            self.v = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=c.bias_qkv)
        self.o = nn.Linear(c.heads * c.head_dim, c.hidden, bias=c.bias_out)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        nh, nkv, hd = self.heads, self.kv_heads, self.head_dim
        if self.fused:
            q, k, v = self.qkv(x).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(B, T, nh, hd).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, nkv, hd).transpose(1, 2)
        v = v.view(B, T, nkv, hd).transpose(1, 2)
        if cos is not None:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if nkv != nh:  # GQA: each kv head serves nh / nkv query heads
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, nh * hd)
        return self.o(y)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.swiglu = c.swiglu
        if self.swiglu:
            self.gate = nn.Linear(c.hidden, c.ffn, bias=c.bias_mlp)
            self.up = nn.Linear(c.hidden, c.ffn, bias=c.bias_mlp)
            self.down = nn.Linear(c.ffn, c.hidden, bias=c.bias_mlp)
        else:
            self.fc_in = nn.Linear(c.hidden, c.ffn, bias=c.bias_mlp)
            self.fc_out = nn.Linear(c.ffn, c.hidden, bias=c.bias_mlp)

    def forward(self, x):
        if self.swiglu:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.fc_out(F.gelu(self.fc_in(x), approximate="tanh"))  # GPT-2's gelu_new


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.parallel = c.parallel_residual
        self.shared_norm = c.parallel_residual and c.norms_per_layer == 1
        self.norm1 = Norm(c.hidden, c.rmsnorm)
        self.attn = Attention(c)
        if not self.shared_norm:
            self.norm2 = Norm(c.hidden, c.rmsnorm)
        self.mlp = Mlp(c)

    def forward(self, x, cos, sin, mask):
        if self.parallel:  # GPT-J / NeoX: x + attn(ln1(x)) + mlp(ln2(x)); GPT-J shares ln1
            h = self.norm1(x)
            return x + self.attn(h, cos, sin, mask) + self.mlp(h if self.shared_norm else self.norm2(x))
        h = x + self.attn(self.norm1(x), cos, sin, mask)
        return h + self.mlp(self.norm2(h))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.card = c
        self.wte = nn.Embedding(c.vocab, c.hidden)
        if not c.rotary:
            self.wpe = nn.Embedding(c.max_pos, c.hidden)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        if c.final_norm:
            self.norm_f = Norm(c.hidden, c.rmsnorm)
        if not c.tied:
            self.lm_head = nn.Linear(c.hidden, c.vocab, bias=c.bias_lm_head)
        if c.rotary:
            inv_freq = 1.0 / torch.pow(10000.0, torch.arange(0, c.rotary_dim, 2, dtype=torch.float) / c.rotary_dim)
            freqs = torch.outer(torch.arange(c.max_pos, dtype=torch.float), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("rope_cos", emb.cos(), persistent=False)
            self.register_buffer("rope_sin", emb.sin(), persistent=False)

    def forward(self, idx):
        c, T = self.card, idx.size(1)
        x = self.wte(idx)
        if not c.rotary:
            x = x + self.wpe(torch.arange(T, device=idx.device))
        cos = self.rope_cos[:T] if c.rotary else None
        sin = self.rope_sin[:T] if c.rotary else None
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # true above the diagonal
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        if c.final_norm:
            x = self.norm_f(x)
        return F.linear(x, self.wte.weight) if c.tied else self.lm_head(x)


@torch.no_grad()
def init_weights(model):
    """GPT-2 style, in named_parameters() order (as the C++ loop): matrices N(0, 0.02), biases 0,
    norm weights 1."""
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            p.normal_(0.0, 0.02)
        elif name.endswith("bias"):
            p.zero_()
        else:
            p.fill_(1.0)


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    blas_threads = set_openblas_threads(a.threads)
    card = Card(resolve_card(a.model))
    if a.seq_len > card.max_pos:
        sys.exit("torch_loop.py: --seq-len exceeds max_position_embeddings")

    torch.manual_seed(a.seed)
    model = Transformer(card)
    init_weights(model)
    model.train()
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)

    # Synthetic data: fresh random tokens for every step, drawn up front from the same generator.
    tokens = torch.randint(card.vocab, (a.steps, a.micro_batch, a.seq_len + 1), dtype=torch.long)
    opt = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    step_s, loss_first, loss_last = [], 0.0, 0.0
    for step in range(a.steps):
        inp, tgt = tokens[step, :, :-1], tokens[step, :, 1:]
        t0 = time.perf_counter()
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, card.vocab), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        loss_value = loss.item()
        t1 = time.perf_counter()
        if step == 0:
            loss_first = loss_value
        loss_last = loss_value
        if step >= a.warmup:
            step_s.append(t1 - t0)
    median = statistics.median(step_s)
    tokens_per_s = a.micro_batch * a.seq_len / median

    if a.json:
        print(json.dumps({
            "impl": "python_torch", "model": card.name, "tokens_per_second": tokens_per_s,
            "step_seconds_median": median, "parameters": n_params, "threads": a.threads,
            "seq_len": a.seq_len, "micro_batch": a.micro_batch, "steps": a.steps,
            "warmup": a.warmup, "openblas_threads": blas_threads, "loss_first": loss_first,
            "loss_last": loss_last, "torch_version": torch.__version__}))
    else:
        print(f"python_torch  model {card.name}  parameters {n_params}  threads {a.threads} (openblas {blas_threads})")
        print(f"seq_len {a.seq_len}  micro_batch {a.micro_batch}  steps {a.steps} (warm-up {a.warmup})"
              f"  loss {loss_first:.4f} -> {loss_last:.4f}")
        print(f"median step {median:.4f} s  tokens/s {tokens_per_s:.1f}")


if __name__ == "__main__":
    main()
