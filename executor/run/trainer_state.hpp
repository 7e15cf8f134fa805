#pragma once
// The trainer's working set (private to run/trainer*.cpp).
#include <memory>
#include <optional>

#include "checkpointing.hpp"
#include "executor/comm/process_groups.hpp"
#include "executor/data/dataset.hpp"
#include "executor/data/sampler.hpp"
#include "executor/engine/loss_scaler.hpp"
#include "executor/engine/lr_schedule.hpp"
#include "executor/engine/zero_engine.hpp"
#include "executor/metrics/run_report.hpp"
#include "executor/model/nf4_base.hpp"
#include "executor/model/transformer.hpp"
#include "formats/plan.hpp"
#include "threads.hpp"

namespace shardplan::executor {

struct TrainerState {
  TrainerState(MpiRuntime& rt, RunOptions o) : runtime(rt), opt(std::move(o)) {}
  MpiRuntime& runtime;
  RunOptions opt;
  formats::Plan plan;
  simulator::Precision precision = simulator::Precision::fp32;
  simulator::MixedPrecision mixed_precision = simulator::MixedPrecision::master_weights;
  // The weights' dtype: fp32, or the compute dtype with master weights.
  [[nodiscard]] torch::ScalarType weight_dtype() const {
    if (simulator::fp32_weights(precision, mixed_precision)) return torch::kFloat;
    return precision == simulator::Precision::fp16 ? torch::kHalf : torch::kBFloat16;
  }
  torch::Device device{torch::kCPU};  // this rank's run device (run/device.hpp)
  ThreadSetup threads;
  std::unique_ptr<ProcessGroups> groups;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<data::Dataset> dataset;
  std::unique_ptr<data::Sampler> sampler;
  std::unique_ptr<ZeroEngine> engine;
  std::unique_ptr<Checkpointer> checkpointer;
  nlohmann::json layout;
  Nf4BaseSummary nf4_base;  // QLoRA: this rank's NF4 base (model/nf4_base.hpp)
  LrSchedule lr;
  LossScaler scaler;
  int64_t start_step = 0;  // completed steps when training starts (resume)
  int attempt = 1;         // of this run in metrics.jsonl (run_history.hpp)
  int64_t done_steps = 0;
  bool interrupted = false;
  bool stopped_early = false;
  double reference_gemm_start_s = 0, reference_gemm_end_s = 0;  // the machine's speed (train_loop.cpp)
  MetricsLog metrics;
  std::vector<StepRecord> records;
  std::vector<simulator::PipelineOp> pipeline_ops;  // this stage's schedule (every step)
};

}  // namespace shardplan::executor
