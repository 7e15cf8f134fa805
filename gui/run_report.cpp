#include "run_report.hpp"

#include "formats/run_report.hpp"

namespace shardplan::gui {

MeasuredRun load_run_report(const std::string& path) {
  const formats::RunReport rep = formats::load_run_report(path);
  const auto& m = rep.measured;
  MeasuredRun r;
  r.source = path;
  r.plan = rep.plan;
  r.model = rep.model;
  r.world_size = rep.world_size;
  r.step_s = m.step_s;
  r.tokens_per_s = m.tokens_per_s;
  r.compute_s = m.compute_s;
  r.tp_comm_s = m.tp_comm_s;
  r.dp_comm_s = m.dp_comm_s;
  r.optimizer_s = m.optimizer_s;
  r.peak_bytes = static_cast<double>(m.peak_bytes);
  for (int64_t b : m.peak_bytes_per_rank) r.peak_bytes_per_rank.push_back(static_cast<double>(b));
  if (rep.predicted) {
    r.predicted_step_s = rep.predicted->step_s;
    r.predicted_peak_bytes = rep.predicted->peak_bytes;
  }
  return r;
}

}  // namespace shardplan::gui
