#pragma once
// SearchWorker: runs planner::search on its own QThread with the planner's cancel flag and
// on_block callback; streams each block's best candidate and the progress back by (queued)
// signals, then simulates every candidate in full and delivers the outcome. The GUI thread
// never waits on it (only the destructor does, after cancelling).
#include <QObject>
#include <QThread>
#include <QVector>
#include <atomic>
#include <memory>

#include "candidate_row.hpp"
#include "plan_request.hpp"

namespace shardplan::gui {

struct SearchOutcome {
  planner::SearchResult result;
  std::vector<CandidateRow> rows;  // ranked, then Pareto, then streamed; all simulated in full
  ResolvedRequest request;
  QString error;  // one line; empty when the search ran
  bool cancelled = false;
};

using CandidateBatch = QVector<planner::Candidate>;
using OutcomePtr = std::shared_ptr<const SearchOutcome>;

class SearchWorker : public QObject {
  Q_OBJECT
 public:
  explicit SearchWorker(QObject* parent = nullptr);
  ~SearchWorker() override;
  SearchWorker(const SearchWorker&) = delete;
  SearchWorker& operator=(const SearchWorker&) = delete;

  // Starts a search; false when one is already running.
  bool start(ResolvedRequest request, int threads = 0);
  void cancel();
  [[nodiscard]] bool isRunning() const;

 signals:
  void progressed(int permille, qlonglong considered);
  void candidatesFound(const shardplan::gui::CandidateBatch& batch);
  void finished(const shardplan::gui::OutcomePtr& outcome);

 private:
  void run(const ResolvedRequest& request, int threads);

  QThread* thread_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> running_{false};
};

// The full simulations of a search's candidates, as table rows (also used for opened plans).
std::vector<CandidateRow> rows_of(const planner::SearchResult& result, const std::vector<planner::Candidate>& streamed,
                                  const ResolvedRequest& request, const std::atomic<bool>* cancel);

}  // namespace shardplan::gui

Q_DECLARE_METATYPE(shardplan::gui::CandidateBatch)
Q_DECLARE_METATYPE(shardplan::gui::OutcomePtr)
