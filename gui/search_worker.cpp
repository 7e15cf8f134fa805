#include "search_worker.hpp"

#include <chrono>
#include <map>
#include <set>

#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::gui {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;

namespace {

constexpr auto kBatchInterval = std::chrono::milliseconds(50);
constexpr std::size_t kMaxRows = 4000;  // streamed candidates simulated in full at the end

// Full simulation of one candidate; null when validate_config refuses it.
std::shared_ptr<const sim::Prediction> simulate_row(const sim::ModelSpec& model, pl::Candidate& c,
                                                    double train_tokens) {
  try {
    sim::validate_config(model, c.cluster, c.config);
    sim::Evaluator ev(model, c.cluster, c.config.lora);
    return std::make_shared<const sim::Prediction>(ev.simulate(c.config, sim::TrainingGoal{train_tokens}));
  } catch (const std::exception&) { return nullptr; }
}

}  // namespace

std::vector<CandidateRow> rows_of(const pl::SearchResult& result, const std::vector<pl::Candidate>& streamed,
                                  const ResolvedRequest& request, const std::atomic<bool>* cancel) {
  auto model = std::make_shared<const sim::ModelSpec>(request.model);
  std::vector<CandidateRow> rows;
  std::set<std::string> seen;
  std::set<std::string> front;
  for (const auto& c : result.pareto) front.insert(c.key);
  int rank = 0;
  for (const auto& r : result.ranked) {
    CandidateRow row{r.candidate,    model,  std::make_shared<const sim::Prediction>(r.prediction),
                     Origin::ranked, ++rank, front.count(r.candidate.key) > 0,
                     std::nullopt};
    seen.insert(r.candidate.key);
    for (const auto& same : r.equivalents) seen.insert(same);  // folded into this row: not shown again
    rows.push_back(std::move(row));
  }
  auto add = [&](const pl::Candidate& c, Origin origin) {
    if (rows.size() >= kMaxRows || !seen.insert(c.key).second) return;
    if (cancel && cancel->load()) return;
    CandidateRow row{c, model, nullptr, origin, 0, front.count(c.key) > 0, std::nullopt};
    row.prediction = simulate_row(*model, row.candidate, request.options.train_tokens);
    rows.push_back(std::move(row));
  };
  for (const auto& c : result.pareto) add(c, Origin::pareto);
  for (const auto& c : streamed) add(c, Origin::streamed);
  return rows;
}

SearchWorker::SearchWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<CandidateBatch>();
  qRegisterMetaType<OutcomePtr>();
}

SearchWorker::~SearchWorker() {
  cancel();
  if (thread_) {
    thread_->wait();
    delete thread_;
  }
}

bool SearchWorker::isRunning() const { return running_.load(); }

void SearchWorker::cancel() { cancel_.store(true); }

bool SearchWorker::start(ResolvedRequest request, int threads) {
  if (isRunning()) return false;
  if (thread_) {
    thread_->wait();  // it has delivered its outcome and is returning
    delete thread_;
  }
  cancel_.store(false);
  running_.store(true);
  thread_ = QThread::create([this, req = std::move(request), threads] { run(req, threads); });
  thread_->setObjectName("shardplan-search");
  thread_->start();
  return true;
}

void SearchWorker::run(const ResolvedRequest& request, int threads) {
  auto outcome = std::make_shared<SearchOutcome>();
  outcome->request = request;
  std::vector<pl::Candidate> streamed;
  CandidateBatch batch;
  auto last_emit = std::chrono::steady_clock::now() - kBatchInterval;
  int last_permille = -1;
  pl::SearchOptions options = request.options;
  options.threads = threads;
  options.cancel = &cancel_;
  // Called by the planner's threads one at a time: collect, emit at most every kBatchInterval.
  options.on_block = [&](const pl::SearchProgress& p) {
    if (p.candidate) {
      streamed.push_back(*p.candidate);
      batch.push_back(*p.candidate);
    }
    const int permille = p.blocks_total ? static_cast<int>(1000 * p.blocks_done / p.blocks_total) : 1000;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_emit < kBatchInterval && p.blocks_done < p.blocks_total) return;
    last_emit = now;
    if (permille != last_permille) emit progressed(last_permille = permille, p.considered);
    if (!batch.isEmpty()) emit candidatesFound(std::exchange(batch, {}));
  };
  try {
    outcome->result = pl::search(request.model, request.hardware, request.space, request.constraints, options);
    if (!batch.isEmpty()) emit candidatesFound(std::exchange(batch, {}));
    outcome->rows = rows_of(outcome->result, streamed, request, &cancel_);
  } catch (const std::exception& e) { outcome->error = QString::fromStdString(e.what()); }
  outcome->cancelled = cancel_.load() || outcome->result.interrupted;
  running_.store(false);
  emit finished(outcome);
}

}  // namespace shardplan::gui
