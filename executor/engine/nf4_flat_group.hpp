#pragma once
// FSDP-QLoRA: ZeRO-3 of a frozen NF4 base. The NF4 bases of one ZeRO unit (model/nf4.hpp) are
// packed into one flat byte buffer, padded to a multiple of the sharding group size S and
// sharded like any flat parameter; the unit's materialize all-gathers it (before forward and
// again before backward) and its release drops it, so between uses a rank holds 1/S of the
// unit's NF4 bytes. This is bitsandbytes' `Params4bit(quant_storage=...)` idea (the packed 4-bit
// storage typed so FSDP flattens and shards it with the other parameters; Answer.AI fsdp_qlora
// README, bitsandbytes docs "FSDP-QLoRA"), here with the constants inside the buffer too.
//
// Flat layout (bytes), per NF4 tensor in the unit's block_linears order:
//   [codes: ceil(n/2) uint8][qabsmax: nb uint8][pad to 4][absmax2: 4*ng bytes, fp32]
// then the next tensor; the total padded to a multiple of S (and of 4). Rank s of the sharding
// group owns bytes [s*shard, (s+1)*shard). While gathered, each Nf4Tensor's codes / qabsmax /
// absmax2 are views into `full` (absmax2 a float view of its 4-aligned bytes); dropped, they are
// empty tensors of the same dtypes. The bytes are the quantisation done once at load, copied,
// never recomputed: every gather restores them bit for bit. The scalars (shape, offset, a tp
// slice's run table and group_begin) stay on each Nf4Tensor, as FSDP keeps its flat parameter's
// metadata (shapes, offsets) on every rank.
#include <torch/torch.h>

#include <vector>

#include "executor/comm/communicator.hpp"
#include "executor/model/nf4.hpp"

namespace shardplan::executor {

struct Nf4Slot {
  Nf4Tensor* q = nullptr;
  int64_t codes_at = 0, codes_bytes = 0;
  int64_t qabsmax_at = 0, qabsmax_bytes = 0;
  int64_t absmax2_at = 0, absmax2_bytes = 0;  // 4-aligned
};

struct Nf4FlatGroup {
  std::vector<Nf4Slot> slots;
  int64_t bytes = 0;   // packed bytes before padding
  int64_t padded = 0;  // multiple of the sharding group size and of 4
  int64_t shard = 0;   // owned bytes
  int64_t own_begin = 0;
  torch::Tensor full;        // uint8 (padded): resident only while the unit is gathered
  torch::Tensor shard_data;  // uint8 (shard): this rank's persistent bytes

  // Packs the tensors' current (full, resident) storage, keeps this rank's shard and drops the
  // rest. All ranks of the sharding group pass the same tensors' shapes in the same order.
  void init(const std::vector<Nf4Tensor*>& tensors, int shard_size, int shard_rank);
  // All-gathers the bytes and points every tensor at its part of them.
  void gather(Communicator& shard_group);
  // Empties the tensors and frees the gathered buffer.
  void drop();
  [[nodiscard]] bool empty() const { return slots.empty(); }
};

}  // namespace shardplan::executor
