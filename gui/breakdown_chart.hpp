#pragma once
// BreakdownChart: where one training step's time goes (compute, recompute, TP comm, pipeline
// bubble, exposed DP/ZeRO comm, offload, optimizer) as a stacked bar that adds up to the step;
// with a shardrun report open, the measured step beside it.
#include <QChartView>
#include <optional>
#include <utility>
#include <vector>

#include "formats/run_report.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::gui {

class BreakdownChart : public QChartView {
  Q_OBJECT
 public:
  explicit BreakdownChart(QWidget* parent = nullptr);
  void showPrediction(const simulator::Prediction* p, const formats::RunReport::Measured* measured = nullptr);

  // (part, seconds) of the predicted bar, as drawn; empty when cleared.
  [[nodiscard]] const std::vector<std::pair<QString, double>>& parts() const { return parts_; }
  [[nodiscard]] bool hasMeasuredBar() const { return measured_; }

 private:
  std::vector<std::pair<QString, double>> parts_;
  bool measured_ = false;
};

// The seven parts of a predicted step, in order; they sum to t.step_s.
std::vector<std::pair<QString, double>> step_parts(const simulator::TimeBreakdown& t);

}  // namespace shardplan::gui
