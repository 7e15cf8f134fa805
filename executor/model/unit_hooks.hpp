#pragma once
// UnitHooks: how the model lets the ZeRO engine manage parameters unit by unit (a unit is the
// embedding, one transformer block, or the head — FSDP's "flat parameter" granularity).
// The model calls these around each unit; a null hooks pointer means "parameters are always
// resident" (ZeRO 0-2).
#include <torch/torch.h>

namespace shardplan::executor {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) = 0;  // ZeRO-3: all-gather the unit's parameters
  virtual void after_forward(int unit) = 0;   // ZeRO-3: free them again
  // Wraps a unit's output: in backward, gathers the unit's parameters before its gradient
  // computation starts.
  virtual torch::Tensor wrap_output(int unit, const torch::Tensor& y) = 0;
  // Wraps a unit's input: in backward, signals that the unit's input gradient is done (so its
  // weights are no longer needed).
  virtual torch::Tensor wrap_input(int unit, const torch::Tensor& x) = 0;
};

}  // namespace shardplan::executor
