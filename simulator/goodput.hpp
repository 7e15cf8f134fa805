#pragma once
// Goodput: what failures cost a long run, and how often to checkpoint against them.
//
// Inputs (SI): the job's mean time between failures M (node MTBF / nodes: any node's failure
// stops the synchronous job), the time δ to write one checkpoint, the restart cost R (from the
// failure to training again: detection, health check, relaunch, checkpoint load) and the
// checkpoint interval τ (compute time between checkpoints). Failures are taken as a Poisson
// process (exponential inter-failure times), the assumption under Young's and Daly's results.
//
//   young_interval   τ = sqrt(2 δ M)                                   Young (1974)
//   daly_interval    τ = sqrt(2 δ M)·[1 + ⅓·sqrt(δ/2M) + (δ/2M)/9] − δ  for δ < 2M, else M
//                                                                       Daly (2006)
//   expected_wall_time  T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ       Daly (2006)
//   first_order_waste   δ/τ + (R + τ/2)/M  (fraction of the run lost)   Young (1974)
//   goodput          T_s / T_w (useful compute time / expected wall time)
#include <cstdint>

#include "model_spec.hpp"
#include "parallel_config.hpp"

namespace shardplan::simulator {

// Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9).
double young_interval(double checkpoint_s, double mtbf_s);
// Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
// FGCS 22(3), the higher-order estimate (δ < 2M; τ = M otherwise).
double daly_interval(double checkpoint_s, double mtbf_s);
// Daly (2006), the complete model: expected wall-clock time to finish `solve_s` of compute, checkpointing
// every `interval_s` of compute, with exponentially distributed failures of mean `mtbf_s`.
double expected_wall_time(double solve_s, double interval_s, double checkpoint_s, double restart_s, double mtbf_s);
// solve / expected_wall_time: in (0, 1], independent of the solve time.
double goodput(double interval_s, double checkpoint_s, double restart_s, double mtbf_s);
// Young's first-order fraction of wall time lost: checkpoint overhead δ/τ plus, per failure
// (1/M of the time), the restart R and on average half an interval of rework.
double first_order_waste(double interval_s, double checkpoint_s, double restart_s, double mtbf_s);
// Expected time lost per failure: restart plus half an interval (and its checkpoint) of rework.
double waste_per_failure(double interval_s, double checkpoint_s, double restart_s);

struct GoodputPrediction {
  double job_mtbf_s = 0;          // node MTBF / nodes
  double checkpoint_bytes = 0;    // whole checkpoint: trainable weights + optimizer states
  int checkpoint_writers = 0;     // ranks writing a distinct shard, in parallel
  double checkpoint_write_s = 0;  // δ
  double restart_s = 0;           // R
  double young_interval_s = 0;
  double daly_interval_s = 0;
  int64_t interval_steps = 0;  // Daly's interval rounded to whole steps (>= 1)
  double interval_s = 0;       // interval_steps x step time
  double waste_per_failure_s = 0;
  double goodput = 1;  // at interval_s
};

// Bytes of one checkpoint: every trainable parameter's weight (training precision) plus its
// optimizer state (fp32 master + Adam moments: 12 bytes, 8 when the weights are fp32 — an fp32
// or autocast run — where the weight is the master). A frozen LoRA base is not saved (it is re-created from its
// source).
double checkpoint_bytes(double trainable_parameters, const ParallelConfig& cfg);

// Goodput figures of one configuration (allocation-free: the search calls it per point).
// The shards are written in parallel by tp x pp x (ZeRO >= 1 ? sharding group : 1) ranks, spread
// over as many nodes as they fill, each node at the profile's checkpoint write bandwidth.
GoodputPrediction predict_goodput(const ClusterSpec& cluster, const ParallelConfig& cfg, double trainable_parameters,
                                  double step_s);

}  // namespace shardplan::simulator
