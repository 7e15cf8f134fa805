// The search narrowed to one framework's table (framework_space.hpp).
#include "framework_space.hpp"

#include <algorithm>
#include <map>

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "simulator/errors.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;
namespace fw = shardplan::frameworks;

namespace {

// `list` less the values the table lacks; empty when none is left.
template <class T>
void keep_allowed(std::vector<T>& list, const std::vector<T>& allowed) {
  std::erase_if(list, [&](const T& v) { return std::find(allowed.begin(), allowed.end(), v) == allowed.end(); });
}

// A fixed field: the framework's default unless the user named it; a named value must be in the table.
template <class E>
void fix(E& field, const char* key, const std::vector<E>& allowed, const fw::FrameworkModel& f,
         const std::set<std::string>& given) {
  if (!given.count(key)) {
    if (auto d = f.defaults.find(key); d != f.defaults.end() && d->is_string())
      if (auto v = sim::enum_from_name<E>(d->get<std::string>())) field = *v;
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), field) == allowed.end()) field = allowed.front();
    return;
  }
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), field) == allowed.end()) {
    std::string names;
    for (E v : allowed) names += (names.empty() ? "" : ", ") + std::string(sim::name_of(v));
    throw sim::InputError("--" + std::string(key) + " " + sim::name_of(field) + ": " + f.display + " runs " + names);
  }
}

void narrow_lists(const fw::KnobTable& k, SearchSpace& s, Constraints& c, bool schedules_given) {
  keep_allowed(s.zero_stages, k.zero_stages);
  if (k.schedules.empty()) s.schedules = {sim::PipelineSchedule::one_f_one_b};  // pp 1 only: why_not refuses pp > 1
  else {
    keep_allowed(s.schedules, k.schedules);
    if (!schedules_given)  // and the zero-bubble schedules it runs (torchtitan: ZBVZeroBubble)
      for (auto sched : k.schedules)
        if (sim::splits_backward(sched) &&
            std::find(s.schedules.begin(), s.schedules.end(), sched) == s.schedules.end())
          s.schedules.push_back(sched);
  }
  keep_allowed(s.recomputes, k.recompute);
  keep_allowed(s.precisions, k.precisions);
  keep_allowed(s.fp8_recipes, k.fp8);
  if (!k.tensor_parallel) c.max_tp = 1;
  if (!k.sequence_parallel) s.sequence_parallel = {false};  // SP it requires with tp > 1: why_not per point
  if (!k.offload_optimizer) s.offload_optimizer = {false};
  if (!k.offload_activations) s.offload_activations = {false};
  if (!k.sharding_degree) s.mics = false;
  if (k.cp_kinds.empty()) s.context_parallel = {1};
  if (!k.expert_parallel) s.expert_parallel = {1};
  if (!k.uneven_partition) s.uneven_pipeline = false;
  if (!k.gradient_accumulation) s.gradient_accumulation = false;  // one micro-batch a step: gbs / dp
}

}  // namespace

void narrow_to_framework(const fw::FrameworkModel& f, SearchSpace& s, Constraints& c,
                         const std::set<std::string>& given) {
  const fw::KnobTable& k = f.runs;
  narrow_lists(k, s, c, given.count("schedules") > 0);
  const auto empty = [&](const char* flag, bool is_empty) {
    if (is_empty) throw sim::InputError(std::string(flag) + ": none of the values given is one " + f.display + " runs");
  };
  empty("--zero-stages", s.zero_stages.empty());
  empty("--schedules", s.schedules.empty());
  empty("--recompute", s.recomputes.empty());
  empty("--precision", s.precisions.empty());
  empty("--fp8", s.fp8_recipes.empty());
  fix(s.attention, "attention", k.attention, f, given);
  fix(s.fusion, "fusion", k.fusion, f, given);
  fix(s.mixed_precision, "mixed_precision", k.mixed_precision, f, given);
  fix(s.grad_accum_dtype, "grad_accum_dtype", k.grad_accum, f, given);
  if (!k.cp_kinds.empty()) fix(s.cp_kind, "cp_kind", k.cp_kinds, f, given);
  fix(s.zero3_fetch, "zero3_fetch", k.zero3_fetch, f, given);
  if (s.tp_comm_overlap && !k.tp_comm_overlap)
    throw sim::InputError("--tp-comm-overlap: " + f.display + " has no TP communication overlap");
  c.framework = f;
}

namespace {

// The registry's frameworks that run `cfg` on `cluster`, in registry order; with `first_only`,
// stops at the first (the search asks only whether any does).
std::vector<std::string> running(const sim::ParallelConfig& cfg, const sim::ClusterSpec& cluster, bool first_only) {
  // The newest version of each, with its kernel-level defaults per precision parsed once. Those
  // fields are each framework's own choice (Megatron fuses, torchtitan runs SDPA): judged with its
  // defaults there; the layout and features as the configuration has them.
  struct Entry {
    fw::FrameworkModel model;
    std::map<sim::Precision, fw::KernelDefaults> kernels;
  };
  static const std::vector<Entry> newest = [] {
    std::vector<Entry> v;
    for (const auto& e : fw::registry()) {
      Entry entry{fw::find_framework(e.name, "", "registry"), {}};
      for (const auto& [p, name] : sim::EnumNames<sim::Precision>::table)
        entry.kernels[p] = fw::kernel_defaults(entry.model, p);
      v.push_back(std::move(entry));
    }
    return v;
  }();
  std::vector<std::string> out;
  for (const auto& f : newest) {
    sim::ParallelConfig as_run = cfg;
    fw::apply_kernel_defaults(f.model, f.kernels.at(cfg.precision), as_run);
    if (fw::why_not(f.model, as_run, cluster)) continue;
    out.push_back(f.model.name);
    if (first_only) break;
  }
  return out;
}

}  // namespace

std::vector<std::string> frameworks_running(const sim::ParallelConfig& cfg, const sim::ClusterSpec& cluster) {
  return running(cfg, cluster, false);
}

bool some_framework_runs(const sim::ParallelConfig& cfg, const sim::ClusterSpec& cluster) {
  return !running(cfg, cluster, true).empty();
}

}  // namespace shardplan::planner
