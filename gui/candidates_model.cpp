#include "candidates_model.hpp"

#include <QBrush>
#include <QFont>
#include <limits>

#include "units.hpp"

namespace shardplan::gui {

namespace sim = shardplan::simulator;

namespace {

const char* kHeaders[] = {"#",        "Nodes",     "TP",         "PP",         "DP",       "ZeRO", "MBS",
                          "Schedule", "Recompute", "Extras",     "Precision",  "Tokens/s", "Step", "Memory/device",
                          "MFU",      "$/hour",    "Train time", "Train cost", "Status"};
const char* kTips[] = {"Rank by the objective (full simulation)",
                       "Nodes",
                       "Tensor-parallel degree",
                       "Pipeline-parallel degree",
                       "Data-parallel degree",
                       "ZeRO stage (shard group)",
                       "Micro-batch size (sequences)",
                       "Pipeline schedule (v = model chunks per stage)",
                       "Activation recompute",
                       "Context parallelism (degree, ring or all-to-all), expert parallelism (ep, expert tp), sequence "
                       "parallelism, optimizer / activation offload",
                       "Training precision",
                       "Throughput, tokens per second",
                       "Time per training step",
                       "Device memory of the fullest stage",
                       "Model FLOPs utilisation",
                       "Cluster price per hour",
                       "Time to train the token budget",
                       "Cost to train the token budget",
                       "Where the row comes from and whether it fits"};
static_assert(std::size(kHeaders) == CandidatesModel::kColumnCount);
static_assert(std::size(kTips) == CandidatesModel::kColumnCount);

QString extras(const sim::ParallelConfig& c) {
  QStringList e;
  if (c.cp > 1) e << QString("CP%1%2").arg(c.cp).arg(c.cp_kind == sim::CpKind::all_to_all ? " a2a" : " ring");
  if (c.ep > 1 || c.expert_tp() != c.tp) e << QString("EP%1 ETP%2").arg(c.ep).arg(c.expert_tp());
  if (c.sequence_parallel) e << "SP";
  if (c.offload_optimizer) e << "off-opt";
  if (c.offload_activations) e << "off-act";
  return e.join(' ');
}

QString schedule(const sim::ParallelConfig& c) {
  if (c.pp == 1) return QStringLiteral("–");
  QString s = sim::to_string(c.schedule);
  if (c.virtual_stages > 1) s += QString(" v=%1").arg(c.virtual_stages);
  return s;
}

double train_time(const CandidateRow& r) {
  if (r.prediction && r.prediction->train_time_s) return *r.prediction->train_time_s;
  return std::numeric_limits<double>::quiet_NaN();
}

double train_cost(const CandidateRow& r) {
  if (r.prediction && r.prediction->train_cost_usd) return *r.prediction->train_cost_usd;
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

QString status_text(const CandidateRow& r) {
  QString s;
  switch (r.origin) {
    case Origin::ranked:
      s = r.rank == 1 ? QStringLiteral("best") : QString("ranked #%1").arg(r.rank);
      break;
    case Origin::pareto:
      s = QStringLiteral("Pareto");
      break;
    case Origin::streamed:
      s = r.prediction ? QStringLiteral("explored") : QStringLiteral("estimate");
      break;
    case Origin::opened:
      s = QStringLiteral("opened plan");
      break;
  }
  if (r.pareto && r.origin != Origin::pareto) s += QStringLiteral(", Pareto");
  if (!r.feasible()) s += QStringLiteral(", does not fit");
  return s;
}

CandidatesModel::CandidatesModel(QObject* parent) : QAbstractTableModel(parent) {}

int CandidatesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CandidatesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant CandidatesModel::display(const CandidateRow& r, int column) const {
  const auto& c = r.candidate.config;
  switch (column) {
    case kRank:
      return r.rank > 0 ? QVariant(r.rank) : QVariant(QStringLiteral("–"));
    case kNodes:
      return r.candidate.cluster.nodes;
    case kTp:
      return c.tp;
    case kPp:
      return c.pp;
    case kDp:
      return c.dp;
    case kZero:
      return c.zero_stage > 0 && c.shard_group() != c.dp ? QString("%1 (%2)").arg(c.zero_stage).arg(c.shard_group())
                                                         : QString::number(c.zero_stage);
    case kMbs:
      return c.micro_batch_size;
    case kSchedule:
      return schedule(c);
    case kRecompute:
      return QString(sim::to_string(c.recompute));
    case kExtras:
      return extras(c);
    case kPrecision:
      return QString(sim::to_string(c.precision));
    case kTokensPerS:
      return format_count(r.tokens_per_s());
    case kStepS:
      return format_seconds(r.step_s());
    case kMemory:
      return format_gib(r.worst_memory_bytes());
    case kMfu:
      return QString::number(100 * r.mfu(), 'f', 1) + " %";
    case kUsdPerHour:
      return format_usd(r.usd_per_hour());
    case kTrainTime:
      return format_seconds(train_time(r));
    case kTrainCost:
      return format_usd(train_cost(r));
    case kStatus:
      return status_text(r);
    default:
      return {};
  }
}

QVariant CandidatesModel::sortValue(const CandidateRow& r, int column) const {
  const auto& c = r.candidate.config;
  switch (column) {
    case kRank:
      return r.rank > 0 ? r.rank : std::numeric_limits<int>::max();
    case kZero:
      return c.zero_stage * 10000 + c.shard_group();
    case kSchedule:
      return c.pp == 1 ? QString() : schedule(c);
    case kTokensPerS:
      return r.tokens_per_s();
    case kStepS:
      return r.step_s();
    case kMemory:
      return r.worst_memory_bytes();
    case kMfu:
      return r.mfu();
    case kUsdPerHour:
      return r.usd_per_hour();
    case kTrainTime:
      return train_time(r);
    case kTrainCost:
      return train_cost(r);
    default:
      return display(r, column);
  }
}

QVariant CandidatesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const CandidateRow& r = rows_[static_cast<std::size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return display(r, index.column());
    case kSortRole:
      return sortValue(r, index.column());
    case kRowRole:
      return index.row();
    case kKeyRole:
      return QString::fromStdString(r.candidate.key);
    case Qt::ToolTipRole:
      return QString::fromStdString(r.candidate.key) +
             (r.prediction && !r.prediction->feasible ? "\n" + QString::fromStdString(r.prediction->infeasible_reason)
                                                      : QString());
    case Qt::TextAlignmentRole:
      return index.column() >= kTokensPerS && index.column() <= kTrainCost ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                                                           : QVariant(Qt::AlignCenter);
    case Qt::ForegroundRole:
      return r.feasible() ? QVariant() : QVariant(QBrush(Qt::darkRed));
    case Qt::FontRole: {
      if (r.rank != 1) return {};
      QFont f;
      f.setBold(true);
      return f;
    }
    default:
      return {};
  }
}

QVariant CandidatesModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::DisplayRole) return QString(kHeaders[section]);
  if (role == Qt::ToolTipRole) return QString(kTips[section]);
  return {};
}

void CandidatesModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

void CandidatesModel::appendStreamed(const CandidateBatch& batch, const std::shared_ptr<const sim::ModelSpec>& model) {
  if (batch.isEmpty()) return;
  const int first = static_cast<int>(rows_.size());
  beginInsertRows({}, first, first + static_cast<int>(batch.size()) - 1);
  for (const auto& c : batch)
    rows_.push_back(CandidateRow{c, model, nullptr, Origin::streamed, 0, false, std::nullopt});
  endInsertRows();
}

void CandidatesModel::setRows(std::vector<CandidateRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int CandidatesModel::addRow(CandidateRow row) {
  const int at = static_cast<int>(rows_.size());
  beginInsertRows({}, at, at);
  rows_.push_back(std::move(row));
  endInsertRows();
  return at;
}

}  // namespace shardplan::gui
