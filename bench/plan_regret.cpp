// Plan regret (a benchmark, not a test): for every run of a runs file (default the shipped
// runs/published.json), `plan --framework F` on that run's cluster, model, global batch, sequence
// length and precision recipe, with its kernels (attention, fusion, mixed precision): the published
// layout's predicted throughput, the planner's best, the gap, the published layout's rank, and
// whether the #1 exports to F. Where the planner claims more than 10 % over the published layout,
// the knobs that differ, so a reader can judge a finding from a model error.
//   build/release/bench/plan_regret [runs.json]
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "calibration/runs_file.hpp"
#include "frameworks/apply.hpp"
#include "interop/accelerate.hpp"
#include "interop/habana.hpp"
#include "interop/launch_export.hpp"
#include "interop/neuron.hpp"
#include "interop/smp_v2.hpp"
#include "interop/torchtitan.hpp"
#include "planner/framework_space.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;
namespace cal = shardplan::calibration;
namespace io = shardplan::interop;

// "" when the plan exports to the framework, "-" when the framework has no export, else why not.
std::string export_to(const shardplan::formats::Plan& p, const std::string& fw) {
  try {
    if (fw == "megatron" || fw == "nemo") (void)io::megatron_command_line(p);
    else if (fw == "deepspeed" || fw == "megatron-deepspeed") (void)io::deepspeed_config(p);
    else if (fw == "torchtitan") (void)io::torchtitan_toml(p);
    else if (fw == "accelerate-fsdp") (void)io::accelerate_yaml(p);
    else if (fw == "smp-v2") (void)io::smp_v2_config(p);
    else if (fw == "neuronx-distributed") (void)io::neuron_command_line(p);
    else if (fw == "optimum-habana") (void)io::habana_deepspeed_config(p);
    else return "-";
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

// The run's space: its cluster and batch, its precision recipe and kernels; the layouts searched.
pl::SearchSpace space_of(const cal::RecordedRun& r) {
  const sim::ParallelConfig& c = r.plan.config;
  pl::SearchSpace s;
  s.node_counts = {r.plan.cluster.nodes};
  s.devices_per_node = r.plan.cluster.per_node();
  s.global_batch_sizes = {c.global_batch_size};
  s.seq_len = c.seq_len;
  if (std::find(s.micro_batch_sizes.begin(), s.micro_batch_sizes.end(), c.micro_batch_size) ==
      s.micro_batch_sizes.end())
    s.micro_batch_sizes.push_back(c.micro_batch_size);
  std::sort(s.micro_batch_sizes.begin(), s.micro_batch_sizes.end());
  if (c.virtual_stages > 1 &&
      std::find(s.virtual_stages.begin(), s.virtual_stages.end(), c.virtual_stages) == s.virtual_stages.end())
    s.virtual_stages.push_back(c.virtual_stages);  // the published layout is in the space
  s.precisions = {c.precision};
  s.fp8_recipes = {c.fp8};
  s.mixed_precision = c.mixed_precision;
  s.attention = c.attention;
  s.fusion = c.fusion;
  s.grad_accum_dtype = c.grad_accum_dtype;
  s.zero3_fetch = c.zero3_fetch;
  s.packed_document_tokens = c.packed_document_tokens;
  s.lora = c.lora;
  s.cp_kind = c.cp_kind;
  s.context_parallel = pl::cp_search_list("auto", c.seq_len);
  if (std::find(s.context_parallel.begin(), s.context_parallel.end(), c.cp) == s.context_parallel.end())
    s.context_parallel.push_back(c.cp);
  s.expert_parallel = pl::ep_search_list("auto", r.plan.model);
  s.tp_comm_overlap = c.tp_comm_overlap;
  return s;
}

struct Tally {
  int runs = 0, within_10 = 0, searched = 0, exportable = 0, exported = 0;
};

void one_run(const cal::RecordedRun& r, Tally& t) {
  const sim::ParallelConfig& pub = r.plan.config;
  const std::string fw_name = r.framework_name();
  pl::SearchSpace s = space_of(r);
  pl::Constraints c;
  // The planner keeps plan's default headroom (what `plan --framework F` recommends); the published
  // layout, which ran, is simulated at the device's capacity below.
  std::string outside;
  if (r.framework) {
    pl::narrow_to_framework(*r.framework, s, c,
                            {"attention", "fusion", "mixed_precision", "grad_accum_dtype", "cp_kind", "zero3_fetch"});
    if (auto gap = shardplan::frameworks::why_not(*r.framework, pub, r.plan.cluster)) outside = *gap;
  }
  sim::ParallelConfig pub_cfg = pub;
  pub_cfg.memory_headroom = 0;
  const sim::Prediction pp = sim::simulate(r.plan.model, r.plan.cluster, pub_cfg);
  pl::SearchOptions o;
  o.top_k = 50;
  o.threads = 0;
  const pl::SearchResult res = pl::search(r.plan.model, r.plan.cluster.hardware, s, c, o);
  ++t.runs;
  if (res.ranked.empty()) {
    std::printf("%-44s %-20s %10.0f %10s  nothing found\n", r.name.c_str(), fw_name.c_str(), pp.tokens_per_s, "-");
    return;
  }
  ++t.searched;
  const pl::Ranked& best = res.ranked.front();
  const double gap = best.prediction.tokens_per_s / pp.tokens_per_s - 1;
  if (gap <= 0.10) ++t.within_10;
  int rank = 1;
  for (const auto& x : res.ranked)
    if (x.prediction.tokens_per_s > pp.tokens_per_s * (1 + 1e-9)) ++rank;
  const std::string rank_text = rank > static_cast<int>(res.ranked.size()) ? ">50" : std::to_string(rank);
  shardplan::formats::Plan plan{"", r.plan.model, best.candidate.cluster, best.candidate.config, best.prediction,
                                {}, r.framework};
  const std::string exp = export_to(plan, fw_name);
  if (exp != "-") {
    ++t.exportable;
    if (exp.empty()) ++t.exported;
  }
  std::printf("%-44s %-20s %10.0f %10.0f %+7.1f%% %5s %7s", r.name.c_str(), fw_name.c_str(), pp.tokens_per_s,
              best.prediction.tokens_per_s, 100 * gap, rank_text.c_str(),
              exp == "-"    ? "-"
              : exp.empty() ? "yes"
                            : "NO");
  if (gap > 0.10) {
    // How close the best is to the memory it may use (allocated + runtime against capacity less
    // headroom, as the search checks): a claim that rests on a tight fit is only as good as the
    // activation model.
    const sim::Prediction& bp = best.prediction;
    std::printf("  differs: %s (best at %.1f of %.1f GiB)", pl::knob_differences(pub, best.candidate.config).c_str(),
                bp.worst.total() / (1 << 30), bp.usable_bytes / (1 << 30));
  }
  if (!outside.empty()) std::printf("  (published layout outside its table: %s)", outside.c_str());
  if (!exp.empty() && exp != "-") std::printf("  (export: %s)", exp.c_str());
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string path = argc > 1 ? argv[1] : cal::suite_path("published");
    const cal::RunsFile file = cal::load_runs_file(path);
    std::printf("plan regret: %s (%zu runs), plan --framework <the run's> on each run's cluster and batch\n\n",
                path.c_str(), file.runs.size());
    std::printf("%-44s %-20s %10s %10s %8s %5s %7s\n", "run", "framework", "published", "best", "gap", "rank",
                "exports");
    Tally t;
    for (const auto& r : file.runs) one_run(r, t);
    std::printf("\npublished layout within 10 %% of the planner's best: %d of %d runs searched (%.0f %%)\n",
                t.within_10, t.searched, t.searched ? 100.0 * t.within_10 / t.searched : 0.0);
    std::printf("#1 exports to the run's framework: %d of %d with an export\n", t.exported, t.exportable);
    return 0;
  } catch (const sim::InputError& e) {
    std::fprintf(stderr, "plan_regret: %s\n", e.what());
    return 2;
  }
}
