#pragma once
// FlatGroup: the parameters of one ZeRO unit (trainable or frozen) as one flat buffer of the
// weights' dtype (fp32, or bf16/fp16 with master weights), padded to a multiple of the sharding
// group size; the rank owns [own_begin, own_begin + shard). Parameters are views into `full`
// while resident; gradients have the weights' dtype. With 16-bit weights the owned elements
// also have an fp32 master copy, which the optimizer updates. See zero_engine.hpp.
#include <torch/torch.h>

#include <vector>

#include "executor/comm/communicator.hpp"
#include "executor/model/parameter.hpp"
#include "nf4_flat_group.hpp"

namespace shardplan::executor {

struct ParamSlot {
  int index = 0;       // into Transformer::parameters()
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
  std::vector<int64_t> shape;  // the local (tensor-parallel shard) shape
};

struct FlatGroup {
  std::vector<ParamSlot> slots;
  bool trainable = false;
  int stage = 0;
  int64_t numel = 0;
  int64_t padded = 0;
  int64_t shard = 0;  // owned elements (== padded at stage 0)
  int64_t own_begin = 0;
  torch::Tensor full;                       // (padded): resident parameters (stage 3: only while gathered)
  torch::Tensor shard_data;                 // (shard): stage 3's persistent parameter shard
  torch::Tensor grad_full;                  // (padded): stage 0/1 gradients; params' .grad are views
  torch::Tensor grad_shard;                 // (shard): stage 2/3 reduced gradient shard
  torch::Tensor exp_avg, exp_avg_sq;        // (shard): AdamW moments of the owned elements
  torch::Tensor master;                     // (shard): fp32 master of the owned elements (16-bit weights only)
  torch::Device device{torch::kCPU};        // the parameters' device: every buffer lives there
  torch::ScalarType dtype = torch::kFloat;  // the weights' (and gradients') dtype

  // Builds the buffers from the parameters' current values, converting them to `weight_dtype`
  // (stage 3 then drops `full`).
  void init(std::vector<Parameter>& params, int shard_size, int shard_rank, int zero_stage,
            torch::ScalarType weight_dtype);
  void zero_grad(std::vector<Parameter>& params, int zero_stage);
  // Stage 2/3: this micro-batch's gradients as one padded flat tensor; the params' .grad are
  // dropped (freed).
  torch::Tensor take_grads(std::vector<Parameter>& params);
  // Stage 3: all-gather the parameters / drop them.
  void gather(std::vector<Parameter>& params, Communicator& shard_group);
  void drop(std::vector<Parameter>& params);
  [[nodiscard]] torch::TensorOptions options() const;  // `dtype` on `device`
  // Owned parameter and gradient elements (views).
  [[nodiscard]] torch::Tensor owned_params() const;
  // What the optimizer updates and a checkpoint saves: `master` if there is one, else the
  // owned parameters.
  [[nodiscard]] torch::Tensor optimizer_params() const;
  // After an update of `master`: round it into the owned parameters (no-op without master).
  void copy_master_to_params();
  [[nodiscard]] torch::Tensor owned_grads() const;
  // Calls f(slot, begin, length) for each parameter's part inside the owned range, with
  // `begin` relative to the owned range.
  template <typename F>
  void for_each_owned(F&& f) const {
    for (const ParamSlot& s : slots) {
      const int64_t b = std::max(s.offset, own_begin), e = std::min(s.offset + s.numel, own_begin + shard);
      if (b < e) f(s, b - own_begin, e - b);
    }
  }
};

struct EngineUnit {
  FlatGroup train, frozen;
  Nf4FlatGroup nf4;  // stage 3 of a QLoRA run: the unit's NF4 bases, sharded (nf4_flat_group.hpp)
  int expected = 0;  // trainable parameters (gradient arrivals per backward)
  int arrived = 0;
  bool has_input = false;  // the unit's input is wrapped (stage 3)
  bool input_done = false;
  bool ready = false;
  bool resident = true;
};

}  // namespace shardplan::executor
