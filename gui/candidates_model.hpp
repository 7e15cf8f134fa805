#pragma once
// CandidatesModel: the table of candidates (Qt Model/View). Display text carries units;
// Qt::UserRole holds the raw SI value each column sorts by; kRowRole the source row index.
#include <QAbstractTableModel>
#include <vector>

#include "candidate_row.hpp"
#include "search_worker.hpp"

namespace shardplan::gui {

class CandidatesModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kRank,
    kNodes,
    kTp,
    kPp,
    kDp,
    kZero,
    kMbs,
    kSchedule,
    kRecompute,
    kExtras,
    kPrecision,
    kTokensPerS,
    kStepS,
    kMemory,
    kMfu,
    kUsdPerHour,
    kTrainTime,
    kTrainCost,
    kStatus,
    kColumnCount
  };
  static constexpr int kSortRole = Qt::UserRole;
  static constexpr int kRowRole = Qt::UserRole + 1;
  static constexpr int kKeyRole = Qt::UserRole + 2;

  explicit CandidatesModel(QObject* parent = nullptr);

  [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const override;
  [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const override;
  [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  [[nodiscard]] QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void clear();
  // Streaming: estimates of each block's best candidate while the search runs.
  void appendStreamed(const CandidateBatch& batch, const std::shared_ptr<const simulator::ModelSpec>& model);
  // The finished search replaces the table (every row simulated in full).
  void setRows(std::vector<CandidateRow> rows);
  // An opened plan.json; returns its row.
  int addRow(CandidateRow row);

  [[nodiscard]] const CandidateRow& row(int r) const { return rows_.at(static_cast<std::size_t>(r)); }
  [[nodiscard]] const std::vector<CandidateRow>& rows() const { return rows_; }

 private:
  [[nodiscard]] QVariant display(const CandidateRow& r, int column) const;
  [[nodiscard]] QVariant sortValue(const CandidateRow& r, int column) const;
  std::vector<CandidateRow> rows_;
};

QString status_text(const CandidateRow& r);

}  // namespace shardplan::gui
