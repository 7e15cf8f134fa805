#pragma once
// What the GUI overlays of a `shardrun` report.json (formats::RunReport): the measured medians
// beside the predicted memory and step time.
#include <string>
#include <vector>

namespace shardplan::gui {

struct MeasuredRun {
  std::string source;  // the file
  std::string plan;    // the plan it ran
  std::string model;
  int world_size = 0;
  double step_s = 0, tokens_per_s = 0, compute_s = 0, tp_comm_s = 0, dp_comm_s = 0, optimizer_s = 0;
  double peak_bytes = 0;  // largest rank
  std::vector<double> peak_bytes_per_rank;
  double predicted_step_s = 0, predicted_peak_bytes = 0;  // what the plan predicted, as stored
};

// Throws simulator::InputError naming the file and field ("report.json: field 'measured.step_seconds':
// expected a number > 0").
MeasuredRun load_run_report(const std::string& path);

}  // namespace shardplan::gui
