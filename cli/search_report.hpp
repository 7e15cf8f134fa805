#pragma once
// The search report: `shardplan plan`'s table, Pareto front and "why not" lines, as text or JSON.
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "planner/search.hpp"

namespace shardplan::cli {

nlohmann::json search_json(const planner::SearchResult& r, const std::optional<std::string>& why);
void print_search(std::ostream& out, const simulator::ModelSpec& model, const planner::SearchResult& r,
                  const planner::SearchOptions& o, const std::optional<std::string>& why, const std::string& out_path);

}  // namespace shardplan::cli
