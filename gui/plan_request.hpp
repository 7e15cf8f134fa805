#pragma once
// PlanRequest: what the inputs panel edits — the `shardplan plan` flags as the user typed them —
// and its translation into the planner's SearchSpace / Constraints / SearchOptions with the
// CLI's own parsers, so that the GUI and `shardplan plan` search exactly the same space.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/search.hpp"
#include "planner/search_defaults.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/model_spec.hpp"

namespace shardplan::gui {

// Every default but the model and hardware is the search's own (planner/search_defaults.hpp).
struct PlanRequest {
  static const planner::SearchDefaults& d() { return planner::search_defaults(); }
  std::string model = "tiny-llama";                   // built-in name, model card or HF config.json
  std::string hardware = "p4d.24xlarge";              // built-in name or profile JSON (measured ones too)
  std::string nodes = d().nodes;                      // "4", "1,2,4" or "1-8"
  std::string global_batch = d().global_batch_sizes;  // sequences per step; 0 = smallest valid
  std::string seq_len = std::to_string(d().seq_len);
  std::string precision = d().precisions;               // list allowed: "bf16,fp16"
  std::string mixed_precision = d().mixed_precision;    // master_weights | autocast
  std::string attention = d().attention;                // flash | flash1 | eager
  std::string fusion = d().fusion;                      // eager | megatron
  std::string grad_accum_dtype = d().grad_accum_dtype;  // param | fp32 (ZeRO 0/1 16-bit plans)
  std::string packed_document_tokens = std::to_string(d().packed_document_tokens);  // 0 = not packed
  std::string fp8 = d().fp8;              // auto | none | a list of none,delayed,tensorwise,blockwise
  std::string cp = d().context_parallel;  // auto | a list of context-parallel degrees
  std::string cp_kind = d().cp_kind;      // ring | all_to_all
  std::string ep = d().expert_parallel;   // auto | a list of expert-parallel degrees (MoE models)
  std::string lora_rank = std::to_string(d().lora_rank);
  std::string lora_alpha = planner::number_text(d().lora_alpha);
  std::string lora_dropout = planner::number_text(d().lora_dropout);
  std::string lora_targets;               // "q_proj,v_proj"; empty = the model family's default
  std::string lora_base = d().lora_base;  // bf16 | nf4 (QLoRA)
  std::string train_tokens = "0";         // tokens to train on; 0 = dataset tokens x epochs
  std::string dataset_tokens = "0";
  std::string epochs = "1";
  std::string objective = d().objective;  // throughput | time | cost | memory
  std::string max_nodes = std::to_string(d().max_nodes), max_usd_per_hour = planner::number_text(d().max_usd_per_hour),
              max_tp = std::to_string(d().max_tp), headroom = planner::number_text(d().memory_headroom);
  std::string require, forbid;  // comma-separated features
  int top = d().top_k;
  bool operator==(const PlanRequest&) const = default;
};

// Every text field of a request: its name (validation messages, widgets, session JSON) and the
// member behind it. The one table the inputs panel, the session store and the tests read.
using RequestField = std::pair<const char*, std::string PlanRequest::*>;
const std::vector<RequestField>& string_fields();
// The field names alone, in the same order.
const std::vector<std::string>& request_fields();
// The member behind a field name (throws std::out_of_range for an unknown name).
std::string PlanRequest::*request_member(const std::string& field);

// Everything a search needs, resolved and checked.
struct ResolvedRequest {
  simulator::ModelSpec model;
  simulator::HardwareProfile hardware;
  planner::SearchSpace space;
  planner::Constraints constraints;
  planner::SearchOptions options;  // objective, train_tokens, top_k (no callbacks)
  nlohmann::json search_settings;  // what `shardplan plan --out` writes under "search"
};

struct Validation {
  std::map<std::string, std::string> errors;  // field -> one-line reason (as the CLI words it)
  std::optional<ResolvedRequest> resolved;    // set when there is no error
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Checks every field with the CLI's parsers, loads the model and hardware (errors name the file
// and field), resolves LoRA targets and the train-token budget. Never throws.
Validation validate(const PlanRequest& r);

// The `shardplan plan` arguments (without the binary) for the same search.
std::vector<std::string> cli_arguments(const PlanRequest& r);

nlohmann::json to_json(const PlanRequest& r);
// Missing keys keep their defaults; wrong types are ignored (sessions are best effort).
PlanRequest request_from_json(const nlohmann::json& j);

}  // namespace shardplan::gui
