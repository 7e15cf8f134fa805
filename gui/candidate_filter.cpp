#include "candidate_filter.hpp"

#include "candidates_model.hpp"

namespace shardplan::gui {

CandidateFilter::CandidateFilter(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(CandidatesModel::kSortRole);
  setDynamicSortFilter(true);
}

void CandidateFilter::setText(const QString& text) {
  words_ = text.simplified().split(' ', Qt::SkipEmptyParts);
  invalidateFilter();
}

void CandidateFilter::setFeasibleOnly(bool on) {
  feasible_only_ = on;
  invalidateFilter();
}

void CandidateFilter::setParetoOnly(bool on) {
  pareto_only_ = on;
  invalidateFilter();
}

bool CandidateFilter::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  const auto* m = qobject_cast<const CandidatesModel*>(sourceModel());
  if (!m || source_parent.isValid()) return true;
  const CandidateRow& r = m->row(source_row);
  if (feasible_only_ && !r.feasible()) return false;
  if (pareto_only_ && !r.pareto) return false;
  if (words_.isEmpty()) return true;
  const QString text = QString::fromStdString(r.candidate.key) + ' ' + status_text(r);
  for (const auto& w : words_)
    if (!text.contains(w, Qt::CaseInsensitive)) return false;
  return true;
}

}  // namespace shardplan::gui
