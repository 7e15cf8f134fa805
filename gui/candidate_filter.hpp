#pragma once
// CandidateFilter: the proxy between the candidates model and the table — sorts by the raw
// values (CandidatesModel::kSortRole) and filters by configuration text ("tp=8 zero=1": every
// word must appear), feasibility and Pareto membership.
#include <QSortFilterProxyModel>
#include <QStringList>

namespace shardplan::gui {

class CandidateFilter : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit CandidateFilter(QObject* parent = nullptr);
  void setText(const QString& text);
  void setFeasibleOnly(bool on);
  void setParetoOnly(bool on);
  [[nodiscard]] bool feasibleOnly() const { return feasible_only_; }

 protected:
  [[nodiscard]] bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  QStringList words_;
  bool feasible_only_ = false;
  bool pareto_only_ = false;
};

}  // namespace shardplan::gui
