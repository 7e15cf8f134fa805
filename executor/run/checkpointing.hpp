#pragma once
// Checkpointer: sharded checkpoints of a run over the checkpoint store's directory protocol
// (executor/io/checkpoint_store.hpp). Each owner rank of a ZeRO shard writes
// <tpT-ppP-shardS>.safetensors (its fp32 parameter shard and AdamW moments); rank 0 writes the
// manifest (checksums of every shard + the run state: step, AdamW step, loss scale, seed,
// layout) last and renames the directory into place. Frozen base weights are not saved: they
// are re-created from the recorded init (seed or Hugging Face checkpoint).
// Data position and dropout RNG are functions of the step, so the step restores them.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "executor/comm/process_groups.hpp"
#include "executor/engine/zero_engine.hpp"
#include "executor/io/checkpoint_state.hpp"
#include "options.hpp"

namespace shardplan::executor {

// step, adam_step, loss_scale, good_steps; the Checkpointer fills in its layout on save.
using TrainState = io::CheckpointState;

class Checkpointer {
 public:
  // `layout`: what must match on resume (tp/dp/pp/zero/sharding, model, LoRA, init).
  Checkpointer(const RunOptions& opt, const ProcessGroups& groups, nlohmann::json layout);
  [[nodiscard]] bool enabled() const { return !dir_.empty(); }
  // Collective. Writes the checkpoint of `state.step`.
  void save(ZeroEngine& engine, const TrainState& state);
  // Collective. The state to continue from, or nullopt for a fresh start. Throws InputError
  // (same message on every rank) for an explicit checkpoint that fails verification, a layout
  // mismatch, or a directory whose checkpoints all fail verification.
  std::optional<TrainState> restore(ZeroEngine& engine);

 private:
  std::optional<TrainState> load(ZeroEngine& engine, const std::string& dir, const nlohmann::json& manifest);
  std::string dir_;
  std::string resume_;
  int kill_rank_ = -1;  // --inject-fault ckptkill:RANK:STEP
  int64_t kill_step_ = -1;
  int keep_last_;
  const ProcessGroups& groups_;
  nlohmann::json layout_;
};

// Collective over `comm`: every rank's string, rank-ordered, on every rank.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

}  // namespace shardplan::executor
