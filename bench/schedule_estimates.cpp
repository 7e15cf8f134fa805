// The search's estimate against the event simulation for every pipeline schedule (a benchmark, not a
// test): the planner ranks with Evaluator::estimate (closed forms) and simulates only its finish, so
// an estimate that errs for one schedule ranks it wrongly. Over a grid of models, clusters, pipeline
// depths, micro-batch counts and tensor-parallel degrees, each schedule's step-time error of the
// estimate against Evaluator::simulate: mean |error|, worst, and signed bias, with the worst case;
// given a schedule's name, every point of that schedule too.
//   build/release/bench/schedule_estimates [SCHEDULE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace {

namespace sim = shardplan::simulator;

struct Grid {
  const char* model;
  const char* hardware;
  int nodes;
};

struct Tally {
  int n = 0;
  double sum_abs = 0, sum = 0, worst = 0;
  std::string worst_case;
  void add(double err, const std::string& what) {
    ++n;
    sum_abs += std::abs(err);
    sum += err;
    if (std::abs(err) > std::abs(worst)) {
      worst = err;
      worst_case = what;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string listed = argc > 1 ? argv[1] : "";
  const Grid grids[] = {{"llama2-7b", "p4de.24xlarge", 1},  {"llama2-13b", "p4de.24xlarge", 2},
                        {"llama3.1-70b", "p5.48xlarge", 4}, {"gpt3-175b", "p4de.24xlarge", 8},
                        {"mixtral-8x7b", "p5.48xlarge", 2}, {"llama3.1-405b", "p5.48xlarge", 16}};
  const sim::PipelineSchedule schedules[] = {
      sim::PipelineSchedule::one_f_one_b, sim::PipelineSchedule::interleaved, sim::PipelineSchedule::zb1p,
      sim::PipelineSchedule::zb2p,        sim::PipelineSchedule::zbv,         sim::PipelineSchedule::vhalf,
      sim::PipelineSchedule::vmin,        sim::PipelineSchedule::dualpipev,   sim::PipelineSchedule::dualpipe};
  std::map<sim::PipelineSchedule, Tally> tallies;
  for (const Grid& g : grids) {
    const sim::ModelSpec model = sim::load_model(g.model);
    const sim::ClusterSpec cluster{sim::load_hardware(g.hardware), g.nodes, 0};
    const sim::Evaluator ev(model, cluster);
    const int devices = cluster.devices();
    for (int tp : {1, 2, 4, 8})
      for (int pp : {2, 4, 8, 16})
        for (int per_stage : {1, 2, 4, 8}) {  // micro-batches per pipeline stage
          if (tp * pp > devices || devices % (tp * pp)) continue;
          for (auto s : schedules) {
            sim::ParallelConfig cfg;
            cfg.tp = tp;
            cfg.pp = pp;
            cfg.dp = devices / (tp * pp);
            cfg.sequence_parallel = tp > 1;
            cfg.zero_stage = 1;
            cfg.micro_batch_size = 1;
            cfg.global_batch_size = cfg.dp * pp * per_stage;
            cfg.seq_len = 4096;
            cfg.schedule = s;
            cfg.virtual_stages = s == sim::PipelineSchedule::interleaved || sim::two_chunks(s) ? 2 : 1;
            try {
              sim::validate_config(model, cluster, cfg);
            } catch (const sim::InputError&) { continue; }  // a layout the schedule cannot run
            const double est = ev.estimate(cfg).step_s, simulated = ev.simulate(cfg).time.step_s;
            char what[160];
            std::snprintf(what, sizeof what, "%s %dx%s tp%d pp%d m%d", g.model, g.nodes, g.hardware, tp, pp,
                          cfg.micro_batches());
            tallies[s].add(est / simulated - 1.0, what);
            if (listed == sim::to_string(s)) std::printf("%s %+.2f%%\n", what, 100 * (est / simulated - 1));
          }
        }
  }
  std::printf("%-12s %6s %10s %10s %10s  %s\n", "schedule", "points", "mean|err|", "bias", "worst", "worst at");
  for (auto s : schedules) {
    const Tally& t = tallies[s];
    if (t.n == 0) continue;
    std::printf("%-12s %6d %9.2f%% %+9.2f%% %+9.2f%%  %s\n", sim::to_string(s), t.n, 100 * t.sum_abs / t.n,
                100 * t.sum / t.n, 100 * t.worst, t.worst_case.c_str());
  }
  return 0;
}
