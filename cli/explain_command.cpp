// `shardplan explain plan.json`: what a plan is, what it predicts, and how to launch it.
#include <iostream>

#include "commands.hpp"
#include "formats/plan.hpp"
#include "report.hpp"

namespace shardplan::cli {

Run add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "Pretty-print a plan (re-simulated with this version)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("plan", *path, "plan.json written by `shardplan plan --out`")->required();
  return [path]() {
    const formats::Plan plan = formats::load_plan(*path);
    std::cout << "plan " << *path << " (written by shardplan " << plan.shardplan_version << ")\n";
    if (!plan.config.partition.empty()) {
      std::cout << "  partition (layers per stage):";
      for (int l : plan.config.partition) std::cout << " " << l;
      std::cout << "\n";
    }
    std::cout << "  rank layout: " << plan.config.rank_order << " (fastest-varying first)\n";
    if (plan.search.is_object() && !plan.search.empty()) std::cout << "  search: " << plan.search.dump() << "\n";
    std::cout << "\n";
    print_prediction(std::cout, plan.prediction, plan.config);
    return 0;
  };
}

}  // namespace shardplan::cli
