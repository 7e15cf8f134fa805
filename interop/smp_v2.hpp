#pragma once
// SageMaker model parallel library v2 (SMP v2): a plan as the SageMaker PyTorch estimator's
// `distribution` (SMP v2 parameters) plus the hyperparameters of AWS's SMP v2 example training
// script, and such a document read back. Names in smp_flags.hpp. SMP v2 is FSDP with hybrid
// sharding, tensor, context and expert parallelism and activation offload; it has no pipeline.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config_import.hpp"
#include "formats/plan.hpp"

namespace shardplan::interop {

// {"instance_type", "instance_count", "distribution": {...}, "hyperparameters": {...}}.
// InputError when SMP v2 cannot run the plan (pipeline parallelism, ep with tp or cp).
nlohmann::json smp_v2_config(const formats::Plan& plan);
std::vector<std::string> smp_v2_notes(const formats::Plan& plan);

// The document above (or just the distribution, or just the SMP v2 "parameters"), back to a
// configuration. hybrid_shard_degree counts ranks of the FSDP group (dp x cp); 0 = all of them.
// Without hyperparameters the script's defaults apply (hybrid_shard, bf16, activation
// checkpointing on), as the example script's arguments.py sets them, with a warning.
ImportResult import_smp_v2(const nlohmann::json& doc, const ImportContext& ctx, const std::string& source);

// Whether a JSON document is SMP v2 (v2-only parameter keys or the script's hyperparameters).
bool is_smp_v2(const nlohmann::json& doc);

}  // namespace shardplan::interop
