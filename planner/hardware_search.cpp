// The search over several hardware profiles (hardware_search.hpp).
#include "hardware_search.hpp"

#include <algorithm>

#include "simulator/errors.hpp"
#include "space_parse.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;

namespace {

bool prices_matter(Objective o) { return o == Objective::cost; }

void name_profile(Candidate& c) { c.key = c.cluster.hardware.name + " " + c.key; }

}  // namespace

HardwareSearch search_hardware(const sim::ModelSpec& model, const std::vector<sim::HardwareProfile>& profiles,
                               const SearchSpace& space, const Constraints& constraints, const SearchOptions& options) {
  HardwareSearch out;
  SearchResult& merged = out.result;
  std::vector<Candidate> front;
  for (const auto& hw : profiles) {
    if (prices_matter(options.objective) && hw.price.usd_per_hour <= 0) {
      out.notes.push_back(hw.name + ": no public price (price.usd_per_hour 0): left out of the cost ranking");
      continue;
    }
    SearchResult r = search(model, hw, space, constraints, options);
    for (auto& x : r.ranked) {
      name_profile(x.candidate);
      for (auto& e : x.equivalents) e = hw.name + " " + e;
      merged.ranked.push_back(std::move(x));
    }
    for (auto& c : r.pareto) {
      name_profile(c);
      front.push_back(std::move(c));
    }
    for (auto& g : r.rejected) {
      g.region = hw.name + " " + g.region;
      g.reason = hw.name + ": " + g.reason;
      merged.rejected.push_back(std::move(g));
    }
    merged.evaluated += r.evaluated;
    merged.pruned += r.pruned;
    merged.outranked += r.outranked;
    merged.unrun += r.unrun;
    merged.considered += r.considered;
    merged.seconds += r.seconds;
    merged.interrupted = merged.interrupted || r.interrupted;
    if (r.interrupted) break;
  }
  // By score; equal scores keep profile order (the list's), as each search keeps its own order.
  std::stable_sort(merged.ranked.begin(), merged.ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.score < b.score; });
  if (static_cast<int>(merged.ranked.size()) > options.top_k) merged.ranked.resize(options.top_k);
  merged.pareto = non_dominated(std::move(front));
  return out;
}

std::vector<sim::HardwareProfile> hardware_list(const std::string& spec) {
  std::vector<sim::HardwareProfile> out;
  if (spec == "all") {
    for (const auto& name : sim::builtin_hardware_names()) {
      sim::HardwareProfile hw = sim::load_hardware(name);
      if (hw.device.runtime != sim::DeviceRuntime::cpu) out.push_back(std::move(hw));
    }
    return out;
  }
  for (const auto& name : split_list(spec)) out.push_back(sim::load_hardware(name));
  if (out.empty()) throw sim::InputError("--hardware: expected a profile name, a list of them, or all");
  return out;
}

}  // namespace shardplan::planner
