// Context parallelism: sequence split, ring attention and the Ulysses all-to-alls (legend and
// sources in context_parallel.hpp).
#include "context_parallel.hpp"

#include <cmath>
#include <memory>
#include <vector>

#include "executor/errors.hpp"
#include "executor/model/cpu_gemm.hpp"
#include "mappings.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Tags of the ring's messages (the MPI backend matches by tag; NCCL by issue order, the same on
// every rank of the ring).
constexpr int kTagKv = 31001;
constexpr int kTagDkv = 31002;

// A contiguous run of rows [begin, begin + n) of dim 2 (the sequence of (B, h, Sl, hd)).
struct Rows {
  int64_t begin = 0, n = 0;
};

// Which part of a ring step is visible under the causal mask with load-balanced chunks (rank i
// holds chunks i and 2P-1-i, each of Sl/2 tokens), the K,V block coming from rank j:
//   j == i  all queries against all keys, causal inside (positions compared)
//   j <  i  all queries against the block's first chunk (chunk j precedes both of ours; chunk
//           2P-1-j follows both), nothing masked
//   j >  i  our second chunk against all the block's keys (both precede chunk 2P-1-i; our chunk
//           i precedes both), nothing masked
struct StepPart {
  Rows q, kv;
  bool causal = false;  // the diagonal block: mask by positions
};

StepPart step_part(int me, int src, int64_t Sl) {
  const int64_t half = Sl / 2;
  if (src == me) return {{0, Sl}, {0, Sl}, true};
  if (src < me) return {{0, Sl}, {0, half}, false};
  return {{half, Sl - half}, {0, Sl}, false};
}

// Scaled scores of query rows against keys, grouped-query layout. q: (B, n, Sq, hd),
// k: (B, g, Sk, hd) -> (B, g, G*Sq, Sk) in fp32, G = n/g; row j*Sq + t is query t of head
// kv*G + j. `visible` (Sq, Sk) masks the rest to -inf when defined.
torch::Tensor scores(const torch::Tensor& q, const torch::Tensor& k, double scale, const torch::Tensor& visible) {
  const int64_t B = q.size(0), n = q.size(1), Sq = q.size(2), hd = q.size(3), g = k.size(1);
  const torch::Tensor qg = q.reshape({B, g, (n / g) * Sq, hd});
  torch::Tensor s = cpu::bmm(qg, k.transpose(-2, -1)).to(torch::kFloat) * scale;
  if (visible.defined()) s = s.masked_fill(visible.logical_not().repeat({n / g, 1}), -INFINITY);
  return s;
}

torch::Tensor causal_visible(const torch::Tensor& qpos, const torch::Tensor& kpos) {
  return qpos.unsqueeze(1).ge(kpos.unsqueeze(0));  // (Sq, Sk)
}

// The pair (K, V) of one block travelling the ring as one buffer: (2, B, g, Sl, hd).
struct KvBlock {
  torch::Tensor kv;
  [[nodiscard]] torch::Tensor k() const { return kv[0]; }
  [[nodiscard]] torch::Tensor v() const { return kv[1]; }
};

// Starts the exchange of `t` with the ring's neighbours: sent to rank+1, received from rank-1.
std::unique_ptr<Work> ring_shift(Communicator& cp, const torch::Tensor& t, torch::Tensor& into, int tag) {
  const int P = cp.size(), r = cp.rank();
  into = torch::empty_like(t);
  return cp.send_recv_async(t, (r + 1) % P, into, (r + P - 1) % P, tag);
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  // q: (B, n, Sl, hd), k, v: (B, g, Sl, hd) -> (B, n, Sl, hd)
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               const CpContext* cpc, double scale) {
    Communicator& cp = *cpc->group;
    const int P = cp.size(), me = cp.rank();
    const int64_t B = q.size(0), n = q.size(1), Sl = q.size(2), hd = q.size(3);
    const torch::Tensor pos = cp_positions_of(Sl * P, *cpc, me, torch::kCPU);
    torch::Tensor out = torch::empty({B, n, Sl, hd}, q.options().dtype(torch::kFloat));
    torch::Tensor lse = torch::empty({B, n, Sl}, out.options());
    KvBlock cur{torch::stack({k, v}).contiguous()};
    for (int i = 0; i < P; ++i) {
      const int src = (me - i + P) % P;
      torch::Tensor next;
      std::unique_ptr<Work> shift = i + 1 < P ? ring_shift(cp, cur.kv, next, kTagKv) : nullptr;
      const StepPart part = step_part(me, src, Sl);
      const torch::Tensor qs = q.narrow(2, part.q.begin, part.q.n);
      const torch::Tensor ks = cur.k().narrow(2, part.kv.begin, part.kv.n);
      const torch::Tensor vs = cur.v().narrow(2, part.kv.begin, part.kv.n);
      const torch::Tensor visible = part.causal ? causal_visible(pos, pos).to(q.device()) : torch::Tensor();
      const torch::Tensor s = scores(qs, ks, scale, visible);  // (B, g, G*Sq, Sk)
      const torch::Tensor l = s.logsumexp(-1, true);           // (B, g, G*Sq, 1)
      const torch::Tensor o = cpu::bmm((s - l).exp(), vs.to(torch::kFloat)).view({B, n, part.q.n, hd});
      const torch::Tensor lv = l.view({B, n, part.q.n});
      if (i == 0) {  // the diagonal block: every query sees itself, so every row is finite
        out.copy_(o);
        lse.copy_(lv);
      } else {  // online-softmax merge of this block's partial result into the rows it touches
        torch::Tensor out_r = out.narrow(2, part.q.begin, part.q.n), lse_r = lse.narrow(2, part.q.begin, part.q.n);
        const torch::Tensor merged = torch::logaddexp(lse_r, lv);
        out_r.mul_((lse_r - merged).exp().unsqueeze(-1)).add_(o * (lv - merged).exp().unsqueeze(-1));
        lse_r.copy_(merged);
      }
      if (shift) {
        shift->wait();
        cur.kv = next;
      }
    }
    // Laid out (B, Sl, n, hd) as a fused kernel writes it: the caller's (B, Sl, n*hd) view of it
    // is the output projection's input, so O is stored once (FlashAttention-2 keeps O and the LSE).
    const torch::Tensor result = out.transpose(1, 2).to(q.scalar_type()).contiguous().transpose(1, 2);
    ctx->save_for_backward({q, k, v, result, lse});
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(cpc->group);
    ctx->saved_data["chunks"] = static_cast<int64_t>(cpc->chunks);
    ctx->saved_data["scale"] = scale;
    return result;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor q = saved[0].to(torch::kFloat), dout = grads[0].to(torch::kFloat);
    const torch::Tensor &out = saved[3], &lse = saved[4];
    Communicator& cp = comm_of(ctx);
    CpContext cpc{&cp, simulator::CpKind::ring, static_cast<int>(ctx->saved_data["chunks"].toInt())};
    const double scale = ctx->saved_data["scale"].toDouble();
    const int P = cp.size(), me = cp.rank();
    const int64_t B = q.size(0), n = q.size(1), Sl = q.size(2), hd = q.size(3), g = saved[1].size(1), G = n / g;
    const torch::Tensor pos = cp_positions_of(Sl * P, cpc, me, torch::kCPU);
    // D = rowsum(dO * O) (FlashAttention-2, Algorithm 2, line 4), per query row.
    const torch::Tensor D = (dout * out.to(torch::kFloat)).sum(-1);  // (B, n, Sl)
    torch::Tensor dq = torch::zeros_like(q);
    KvBlock cur{torch::stack({saved[1], saved[2]}).to(torch::kFloat).contiguous()};
    torch::Tensor dkv = torch::zeros_like(cur.kv);  // travels with the block it belongs to
    for (int i = 0; i < P; ++i) {
      const int src = (me - i + P) % P;
      torch::Tensor next_kv;
      std::unique_ptr<Work> shift = i + 1 < P ? ring_shift(cp, cur.kv, next_kv, kTagKv) : nullptr;
      const StepPart part = step_part(me, src, Sl);
      const int64_t nq = part.q.n, nk = part.kv.n;
      const torch::Tensor qs = q.narrow(2, part.q.begin, nq);
      const torch::Tensor ks = cur.k().narrow(2, part.kv.begin, nk), vs = cur.v().narrow(2, part.kv.begin, nk);
      const torch::Tensor visible = part.causal ? causal_visible(pos, pos).to(q.device()) : torch::Tensor();
      const torch::Tensor l = lse.narrow(2, part.q.begin, nq).reshape({B, g, G * nq, 1});
      const torch::Tensor p = (scores(qs, ks, scale, visible) - l).exp();  // (B, g, G*nq, nk)
      const torch::Tensor dog = dout.narrow(2, part.q.begin, nq).reshape({B, g, G * nq, hd});
      const torch::Tensor dp = cpu::bmm(dog, vs.transpose(-2, -1));  // (B, g, G*nq, nk)
      const torch::Tensor ds = p * (dp - D.narrow(2, part.q.begin, nq).reshape({B, g, G * nq, 1}));
      dq.narrow(2, part.q.begin, nq).add_(cpu::bmm(ds, ks).view({B, n, nq, hd}) * scale);
      dkv[0].narrow(2, part.kv.begin, nk).add_(cpu::bmm(ds.transpose(-2, -1), qs.reshape({B, g, G * nq, hd})) * scale);
      dkv[1].narrow(2, part.kv.begin, nk).add_(cpu::bmm(p.transpose(-2, -1), dog));
      // The accumulator moves on with its block; after P moves it is back with its owner.
      torch::Tensor next_dkv;
      ring_shift(cp, dkv, next_dkv, kTagDkv)->wait();
      dkv = next_dkv;
      if (shift) {
        shift->wait();
        cur.kv = next_kv;
      }
    }
    const auto kt = saved[1].scalar_type();
    return {dq.to(saved[0].scalar_type()), dkv[0].to(kt), dkv[1].to(kt), torch::Tensor(), torch::Tensor()};
  }
};

// All-to-all over dim 0 with one equal block per rank. x: (P, ...) -> (P, ...), block p goes to
// rank p, block p of the result came from rank p.
torch::Tensor all_to_all_blocks(const torch::Tensor& x, Communicator& cp) {
  const auto P = static_cast<size_t>(cp.size());
  torch::Tensor in = x.contiguous(), out = torch::empty_like(in);
  const std::vector<int64_t> rows(P, 1);
  cp.all_to_all_v(out, in, rows, rows);
  return out;
}

// x: (B, h, Sl, hd) -> (B, h/P, P*Sl, hd)
torch::Tensor seq_to_heads_impl(const torch::Tensor& x, Communicator& cp) {
  const int64_t P = cp.size(), B = x.size(0), h = x.size(1), Sl = x.size(2), hd = x.size(3);
  EXECUTOR_CHECK(h % P == 0, "Ulysses: the local heads do not divide by cp");
  // send block p = heads [p h/P, (p+1) h/P) of our chunk
  const torch::Tensor y = all_to_all_blocks(x.reshape({B, P, h / P, Sl, hd}).transpose(0, 1), cp);
  return y.permute({1, 2, 0, 3, 4}).reshape({B, h / P, P * Sl, hd});  // block p = chunk p, in order
}

// x: (B, h/P, S, hd) -> (B, h, S/P, hd)
torch::Tensor heads_to_seq_impl(const torch::Tensor& x, Communicator& cp) {
  const int64_t P = cp.size(), B = x.size(0), hp = x.size(1), S = x.size(2), hd = x.size(3);
  // send block p = chunk p of our heads
  const torch::Tensor y = all_to_all_blocks(x.reshape({B, hp, P, S / P, hd}).permute({2, 0, 1, 3, 4}), cp);
  return y.transpose(0, 1).reshape({B, P * hp, S / P, hd});  // block p = rank p's heads
}

struct SeqToHeads : torch::autograd::Function<SeqToHeads> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* cp) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(cp);
    return seq_to_heads_impl(x, *cp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {heads_to_seq_impl(g[0], comm_of(ctx)), torch::Tensor()};
  }
};

struct HeadsToSeq : torch::autograd::Function<HeadsToSeq> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* cp) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(cp);
    return heads_to_seq_impl(x, *cp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {seq_to_heads_impl(g[0], comm_of(ctx)), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor cp_positions_of(int64_t S, const CpContext& cp, int rank, torch::Device device) {
  const int64_t chunks = cp.chunks, P = cp.size();
  EXECUTOR_CHECK(chunks == P || chunks == 2 * P, "context parallel: the sequence is cut into cp or 2cp chunks");
  EXECUTOR_CHECK(S % chunks == 0, "context parallel: the sequence length does not divide into the cp chunks");
  const int64_t c = S / chunks;
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  if (chunks == P) return torch::arange(rank * c, (rank + 1) * c, opts);
  return torch::cat({torch::arange(rank * c, (rank + 1) * c, opts),
                     torch::arange((chunks - 1 - rank) * c, (chunks - rank) * c, opts)});
}

torch::Tensor cp_positions(int64_t S, const CpContext& cp, torch::Device device) {
  return cp_positions_of(S, cp, cp.rank(), device);
}

torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const CpContext& cp, double scale) {
  EXECUTOR_CHECK(cp.active() && cp.chunks == 2 * cp.size(),
                 "ring attention runs on a causal model with load-balanced chunks (2cp)");
  return RingAttention::apply(q, k, v, &cp, scale);
}

torch::Tensor seq_to_heads(const torch::Tensor& x, const CpContext& cp) { return SeqToHeads::apply(x, cp.group); }

torch::Tensor heads_to_seq(const torch::Tensor& x, const CpContext& cp) { return HeadsToSeq::apply(x, cp.group); }

}  // namespace shardplan::executor
