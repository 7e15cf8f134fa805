#pragma once
// One row of the candidates table: a configuration the search found (or a plan the user
// opened), its full simulation, and where it came from.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "planner/search.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::gui {

enum class Origin { streamed, ranked, pareto, opened };

struct CandidateRow {
  planner::Candidate candidate;
  std::shared_ptr<const simulator::ModelSpec> model;
  // Full simulation (event-simulated pipeline); null while only the search's estimate is known.
  std::shared_ptr<const simulator::Prediction> prediction;
  Origin origin = Origin::streamed;
  int rank = 0;                                   // 1-based position in the planner's ranking; 0 = not ranked
  bool pareto = false;                            // on the planner's (time, cost, memory) Pareto front
  std::optional<nlohmann::json> search_settings;  // opened plans: their own "search" object

  [[nodiscard]] bool feasible() const { return prediction ? prediction->feasible : candidate.estimate.fits; }
  [[nodiscard]] double tokens_per_s() const {
    return prediction ? prediction->tokens_per_s : candidate.estimate.tokens_per_s;
  }
  [[nodiscard]] double step_s() const { return prediction ? prediction->time.step_s : candidate.estimate.step_s; }
  [[nodiscard]] double worst_memory_bytes() const {
    return prediction ? prediction->worst.total() : candidate.estimate.worst_memory_bytes;
  }
  [[nodiscard]] double mfu() const { return prediction ? prediction->mfu : candidate.estimate.mfu; }
  [[nodiscard]] double usd_per_hour() const {
    return candidate.cluster.hardware.price.usd_per_hour * candidate.cluster.nodes;
  }
};

}  // namespace shardplan::gui
