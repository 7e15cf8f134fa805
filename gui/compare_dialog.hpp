#pragma once
// CompareDialog: two or more candidates side by side — layout, memory by kind (fullest stage),
// step-time parts, throughput, MFU, price, time and cost to train; the best value of each
// numeric row in bold.
#include <QDialog>
#include <vector>

#include "candidate_row.hpp"

class QTableWidget;

namespace shardplan::gui {

class CompareDialog : public QDialog {
  Q_OBJECT
 public:
  explicit CompareDialog(const std::vector<CandidateRow>& rows, QWidget* parent = nullptr);
  [[nodiscard]] QTableWidget* table() const { return table_; }

 private:
  QTableWidget* table_ = nullptr;
};

}  // namespace shardplan::gui
