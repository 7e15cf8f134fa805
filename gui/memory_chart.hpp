#pragma once
// MemoryChart: per-device memory of every pipeline stage, stacked by kind (parameters,
// gradients, optimizer states, activations, LoRA, buffers, workspace), against the device
// capacity and the usable line (capacity less headroom); a measured peak when a report is open.
#include <QChartView>
#include <optional>

#include "simulator/prediction.hpp"

namespace shardplan::gui {

class MemoryChart : public QChartView {
  Q_OBJECT
 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  // null clears the chart.
  void showPrediction(const simulator::Prediction* p, std::optional<double> measured_peak_bytes = std::nullopt);

  [[nodiscard]] int stageCount() const { return stages_; }
  [[nodiscard]] double capacityGiB() const { return capacity_gib_; }
  // GiB of `kind` (0 = parameters ... 6 = workspace, 7-9 the runtime's context, communicators and
  // library workspace) on `stage`, as drawn; kKindCount kinds in all.
  static constexpr int kKindCount = 10;
  [[nodiscard]] double value(int kind, int stage) const;
  [[nodiscard]] bool hasMeasuredLine() const { return measured_; }

 private:
  int stages_ = 0;
  double capacity_gib_ = 0;
  bool measured_ = false;
};

}  // namespace shardplan::gui
