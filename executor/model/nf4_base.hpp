#pragma once
// QLoRA set-up: the frozen weights of every linear of this stage's blocks become NF4 bases
// (model/nf4.hpp, parallel/nf4_linear.hpp) — all block linears, adapted or not, as PEFT +
// bitsandbytes quantise every nn.Linear of the blocks (the head and embeddings, and the norms and
// biases, stay in the weights' dtype). This is what the simulator's QLoRA memory model counts
// (simulator/step_model.cpp: `block_linear_weights` in NF4, "norms, embeddings, head stay 16-bit").
//
// Each weight is quantised from its FULL tensor (gathered over tp from the loaded or seeded
// values), so every layout dequantises the same values; the rank keeps its slice (the quantised
// base is the tp shard). The weight parameters are dropped from the model: they are neither
// trainable nor in the ZeRO engine's parameter buffers, and their memory is freed (ZeRO-3 packs
// the NF4 bytes of each unit into a sharded flat buffer: engine/nf4_flat_group.hpp). Call it after
// init_weights / load_hf_weights and before the engine is built.
#include <cstdint>

#include "executor/comm/communicator.hpp"
#include "transformer.hpp"

namespace shardplan::executor {

struct Nf4BaseSummary {
  int64_t linears = 0;  // NF4 bases on this rank
  int64_t weights = 0;  // their local weight elements
  int64_t bytes = 0;    // what their NF4 form holds (codes, constants, offsets, run tables)
};

// `tp`: the tensor-parallel group (may be null when the model's tp is 1). Collective over tp.
// Throws InputError (the same on every tp rank) for MoE cards and for shards that do not hold
// whole 64-weight blocks of the full weight.
Nf4BaseSummary quantize_base_nf4(Transformer& model, Communicator* tp);

// The linears of a block, in the order quantize_base_nf4 and the export walk them.
std::vector<ParallelLinear*> block_linears(Block& b);
std::vector<const ParallelLinear*> block_linears(const Block& b);

}  // namespace shardplan::executor
