#pragma once
// The trainer's part of a checkpoint manifest (manifest.json "state", no LibTorch):
//   {"step": N, "adam_step": N, "loss_scale": x, "good_steps": N, "layout": {...}}
// written by the Checkpointer on commit (to_json) and read back on resume. parse_checkpoint_state checks
// every field once, at the edge, and names the one that is wrong:
//   "<dir>: field 'state.adam_step': expected an integer >= 0, got \"x\"".
// The layout (tp/dp/pp/zero/sharding, model, LoRA, init) must equal the running job's.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace shardplan::executor::io {

struct CheckpointState {
  int64_t step = 0;  // completed steps
  int64_t adam_step = 0;
  double loss_scale = 0;  // >= 0; 0: none recorded (the run's initial scale applies)
  int64_t good_steps = 0;
  nlohmann::json layout;
};

// The manifest's "state" object.
nlohmann::json to_json(const CheckpointState& state);

// `manifest` is a whole manifest.json; `dir` names the checkpoint in errors. InputError on any
// missing or ill-typed field, or when `expected_layout` differs from the recorded one.
CheckpointState parse_checkpoint_state(const nlohmann::json& manifest, const std::string& dir,
                                       const nlohmann::json& expected_layout);

}  // namespace shardplan::executor::io
