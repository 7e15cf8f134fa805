#pragma once
// Trainer: one shardrun process. Reads the plan, builds the process groups, the model shard,
// the data and the ZeRO engine, restores a checkpoint if asked, trains, and writes
// metrics.jsonl, report.json, checkpoints and exports.
//
// Set-up phases end with an agreement among all ranks: a user error on any rank (bad plan,
// missing tokenizer, truncated file) reaches every rank, rank 0 prints it, all exit 2.
#include <memory>
#include <nlohmann/json.hpp>

#include "executor/comm/mpi_runtime.hpp"
#include "options.hpp"

namespace shardplan::executor {

struct TrainerState;

class Trainer {
 public:
  Trainer(MpiRuntime& runtime, RunOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  // Returns the process exit code (0, or 130 after an interrupt). Throws InputError for user
  // mistakes found during set-up (identical on every rank) and CommError for peer failures.
  int run();

 private:
  void setup();
  void train();
  void finish();
  std::unique_ptr<TrainerState> s_;
};

// Set by SIGINT/SIGTERM; checked collectively at step boundaries.
void request_stop();

}  // namespace shardplan::executor
