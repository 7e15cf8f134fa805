#pragma once
// ProcessGroups: every parallel group of one rank, built once from the world size and the
// plan's rank-order string (one source of truth: simulator::RankLayout, e.g. "tp-dp-pp" =
// tp fastest-varying, so rank = tp_rank + tp * (dp_rank + dp * pp_rank)).
//
//   tp       ranks that hold the shards of the same layers (Megatron tensor parallel)
//   dp       ranks that hold replicas of the same shard (data parallel)
//   pp       the ranks of one pipeline
//   shard    the ZeRO sharding group: the whole dp group, or MiCS' sub-group of
//            `sharding_degree` consecutive dp ranks
//   replica  dp ranks with the same position in different sharding groups (MiCS); size 1
//            when the sharding group is the whole dp group
//   embedding  the first and the last stage of one pipeline (same tp and dp coordinates):
//            they sum the gradients of tied input/output embeddings (Megatron's embedding
//            group); null on middle stages, the rank alone when pp = 1
#include <memory>
#include <string>

#include "communicator.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::executor {

class MpiRuntime;

enum class Backend { mpi, nccl };

struct RankCoordinates {
  int world = 0;
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int shard = 0;    // index within the sharding group
  int replica = 0;  // which sharding group (MiCS)
};

class ProcessGroups {
 public:
  // Throws InputError when the plan's devices differ from the world size.
  ProcessGroups(const MpiRuntime& runtime, const simulator::ParallelConfig& cfg, Backend backend,
                double timeout_s, const std::string& plan_source);
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  [[nodiscard]] const RankCoordinates& coords() const { return coords_; }
  [[nodiscard]] Communicator& world() const { return *world_; }
  [[nodiscard]] Communicator& tp() const { return *tp_; }
  [[nodiscard]] Communicator& dp() const { return *dp_; }
  [[nodiscard]] Communicator& pp() const { return *pp_; }
  [[nodiscard]] Communicator& shard() const { return *shard_; }
  [[nodiscard]] Communicator& replica() const { return *replica_; }
  [[nodiscard]] Communicator* embedding() const { return embedding_.get(); }
  [[nodiscard]] Backend backend() const { return backend_; }
  // One line: "rank 3: tp 1/2, dp 1/2 (shard 1/2, replica 0/1), pp 0/1".
  [[nodiscard]] std::string describe() const;

 private:
  RankCoordinates coords_;
  Backend backend_;
  std::unique_ptr<Communicator> world_, tp_, dp_, pp_, shard_, replica_, embedding_;
};

}  // namespace shardplan::executor
