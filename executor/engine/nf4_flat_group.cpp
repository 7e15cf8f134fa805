#include "nf4_flat_group.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

int64_t align4(int64_t n) { return (n + 3) / 4 * 4; }

// A tensor's bytes as a flat uint8 view (contiguous).
torch::Tensor as_bytes(const torch::Tensor& t) { return t.contiguous().view({-1}).view(torch::kByte); }

// Points q's tensors at their bytes in `buf` (uint8, the whole padded buffer).
void attach(const Nf4Slot& s, const torch::Tensor& buf) {
  s.q->codes = buf.narrow(0, s.codes_at, s.codes_bytes);
  s.q->qabsmax = buf.narrow(0, s.qabsmax_at, s.qabsmax_bytes);
  s.q->absmax2 = buf.narrow(0, s.absmax2_at, s.absmax2_bytes).view(torch::kFloat);  // (ng) fp32
}

}  // namespace

void Nf4FlatGroup::init(const std::vector<Nf4Tensor*>& tensors, int shard_size, int shard_rank) {
  bytes = 0;
  for (Nf4Tensor* q : tensors) {
    EXECUTOR_CHECK(q->codes.scalar_type() == torch::kByte && q->qabsmax.scalar_type() == torch::kByte &&
                       q->absmax2.scalar_type() == torch::kFloat,
                   "an NF4 base's storage is uint8 codes and constants and fp32 second-level constants");
    Nf4Slot s;
    s.q = q;
    s.codes_at = bytes;
    s.codes_bytes = q->codes.numel();
    s.qabsmax_at = s.codes_at + s.codes_bytes;
    s.qabsmax_bytes = q->qabsmax.numel();
    s.absmax2_at = align4(s.qabsmax_at + s.qabsmax_bytes);
    s.absmax2_bytes = 4 * q->absmax2.numel();
    bytes = s.absmax2_at + s.absmax2_bytes;
    slots.push_back(s);
  }
  const int64_t unit = 4 * static_cast<int64_t>(shard_size);  // S shards of whole 4-byte words
  padded = (bytes + unit - 1) / unit * unit;
  shard = padded / shard_size;
  own_begin = static_cast<int64_t>(shard_rank) * shard;
  if (slots.empty()) return;
  torch::NoGradGuard no_grad;
  const torch::Device device = slots.front().q->codes.device();
  torch::Tensor packed = torch::zeros({padded}, torch::TensorOptions().dtype(torch::kByte).device(device));
  for (const Nf4Slot& s : slots) {
    packed.narrow(0, s.codes_at, s.codes_bytes).copy_(s.q->codes.reshape({-1}));
    packed.narrow(0, s.qabsmax_at, s.qabsmax_bytes).copy_(s.q->qabsmax.reshape({-1}));
    packed.narrow(0, s.absmax2_at, s.absmax2_bytes).copy_(as_bytes(s.q->absmax2));
  }
  shard_data = packed.narrow(0, own_begin, shard).clone();
  drop();  // the tensors' own storage and `packed` are freed here
}

void Nf4FlatGroup::gather(Communicator& shard_group) {
  if (slots.empty()) return;
  full = torch::empty({padded}, shard_data.options());
  shard_group.all_gather(full, shard_data);
  for (const Nf4Slot& s : slots) attach(s, full);
}

void Nf4FlatGroup::drop() {
  for (const Nf4Slot& s : slots) {
    s.q->codes = torch::empty({0}, s.q->codes.options());
    s.q->qabsmax = torch::empty({0}, s.q->qabsmax.options());
    s.q->absmax2 = torch::empty({0}, s.q->absmax2.options());
  }
  full = torch::Tensor();
}

}  // namespace shardplan::executor
