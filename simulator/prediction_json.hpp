#pragma once
// JSON form of configurations and predictions. Keys carry their units.
#include <nlohmann/json.hpp>

#include "parallel_config.hpp"
#include "prediction.hpp"

namespace shardplan::simulator {

nlohmann::json to_json(const ParallelConfig& cfg);
// Inverse of to_json(ParallelConfig); errors name `source` and the field. Not validated
// against a model/cluster here (validate_config does that).
ParallelConfig config_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const MemoryBreakdown& m);
// The step-time breakdown, "..._seconds" keys (a Prediction's "time").
nlohmann::json to_json(const TimeBreakdown& t);
// `with_events`: include the pipeline event trace (stage, chunk, micro-batch, F/B, start, end).
nlohmann::json to_json(const Prediction& p, bool with_events = false);

const char* version();

}  // namespace shardplan::simulator
