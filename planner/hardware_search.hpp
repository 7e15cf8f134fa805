#pragma once
// Which hardware is cheapest (or fastest) for the job: one search over several profiles, each
// profile x node count searched with the same space, constraints and options, the rankings merged
// by the objective's score and the Pareto fronts judged together. Equal, by construction, to the
// per-profile searches merged.
#include <string>
#include <vector>

#include "search.hpp"

namespace shardplan::planner {

struct HardwareSearch {
  SearchResult result;             // rows and front points name their profile first
  std::vector<std::string> notes;  // one line per profile left out (no price under a cost objective)
};

HardwareSearch search_hardware(const simulator::ModelSpec& model,
                               const std::vector<simulator::HardwareProfile>& profiles, const SearchSpace& space,
                               const Constraints& constraints, const SearchOptions& options);

// "all": every built-in profile a framework trains on (not the CPU ones); else the comma-separated
// names or paths. InputError naming --hardware for an unknown one.
std::vector<simulator::HardwareProfile> hardware_list(const std::string& spec);

}  // namespace shardplan::planner
