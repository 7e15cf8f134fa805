// `shardplan simulate`: one configuration of one model on one cluster.
#include <iostream>

#include "commands.hpp"
#include "formats/plan.hpp"
#include "layout_options.hpp"
#include "report.hpp"
#include "resilience_options.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;

namespace {

struct SimulateOptions {
  LayoutOptions layout;
  ResilienceOverrides resilience;
  double train_tokens = 0, dataset_tokens = 0, epochs = 1;
  bool json = false, trace = false;
  std::string plan;
};

void add_options(CLI::App* cmd, SimulateOptions& o) {
  add_layout_options(cmd, o.layout);
  add_resilience_options(cmd, o.resilience);
  cmd->add_option("--plan", o.plan, "Re-simulate a plan.json (instead of --model/--hardware/config flags)");
  cmd->add_option("--train-tokens", o.train_tokens, "Tokens to train on, for time and cost");
  cmd->add_option("--dataset-tokens", o.dataset_tokens, "Dataset size in tokens (with --epochs)");
  cmd->add_option("--epochs", o.epochs, "Epochs over --dataset-tokens");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  cmd->add_flag("--trace", o.trace, "Include the pipeline event trace in --json output");
}

sim::TrainingGoal goal_of(const SimulateOptions& o) {
  if (o.train_tokens < 0) throw sim::InputError("--train-tokens: expected a number >= 0");
  if (o.dataset_tokens < 0 || o.epochs <= 0)
    throw sim::InputError("--dataset-tokens/--epochs: expected tokens >= 0 and epochs > 0");
  return sim::TrainingGoal{o.train_tokens > 0 ? o.train_tokens : o.dataset_tokens * o.epochs};
}

void emit(const SimulateOptions& o, const sim::Prediction& p, const sim::ParallelConfig& cfg) {
  if (o.json) {
    nlohmann::json j = sim::to_json(p, o.trace);
    j["config"] = sim::to_json(cfg);
    std::cout << j.dump(2) << "\n";
  } else {
    print_prediction(std::cout, p, cfg);
  }
}

int simulate_plan(const SimulateOptions& o) {
  formats::Plan plan = formats::load_plan(o.plan);
  sim::ParallelConfig cfg = plan.config;
  emit(o, sim::simulate(plan.model, plan.cluster, cfg, goal_of(o)), cfg);
  return 0;
}

}  // namespace

Run add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Predict memory and step time of one configuration");
  auto o = std::make_shared<SimulateOptions>();
  add_options(cmd, *o);
  return [o]() {
    if (!o->plan.empty()) return simulate_plan(*o);
    Layout l = resolve_layout(
        o->layout, [&](sim::HardwareProfile& hw) { apply_resilience(o->resilience, hw); }, " (or --plan plan.json)");
    emit(*o, sim::simulate(l.model, l.cluster, l.config, goal_of(*o)), l.config);
    return 0;
  };
}

}  // namespace shardplan::cli
