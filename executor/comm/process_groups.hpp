#pragma once
// ProcessGroups: every parallel group of one rank, built once from the world size and the
// plan's rank-order string (one source of truth: simulator::RankLayout, e.g. "tp-dp-pp" =
// tp fastest-varying, so rank = tp_rank + tp * (dp_rank + dp * pp_rank)).
//
//   tp       ranks that hold the shards of the same layers (Megatron tensor parallel)
//   dp       ranks that hold replicas of the same shard (data parallel); with context
//            parallelism every dp x cp rank of the same tp and pp coordinates ("dp-cp": the
//            weights are replicated over cp too, only the sequence is split)
//   cp       the ranks that split one sequence (context parallel)
//   pp       the ranks of one pipeline
//   shard    the ZeRO sharding group: the whole dp group, or MiCS' sub-group of
//            `sharding_degree` consecutive dp ranks
//   replica  dp ranks with the same position in different sharding groups (MiCS); size 1
//            when the sharding group is the whole dp group
//   embedding  the first and the last stage of one pipeline (same tp and dp coordinates):
//            they sum the gradients of tied input/output embeddings (Megatron's embedding
//            group); null on middle stages, the rank alone when pp = 1
//   pipe     where a stage's pipeline messages go (see pipe()): the pp group itself on MPI,
//            whose tags match them; on NCCL, which has no tags, two-rank links of their own
//   expert   (MoE) the ep ranks that split the experts among them, and
//   expert_data  the ranks holding the same experts (expert data parallel), which reduce and
//            ZeRO-shard the experts' gradients and states. Megatron-Core's "parallel folding"
//            (simulator::RankLayout::expert_group): a stage's tp x cp x dp ranks taken in rank
//            order, etp consecutive ones form an expert-tensor group (here: the tp group, etp =
//            tp, or single ranks, etp = 1), ep such groups an expert group, the rest replicate
//            the experts.
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "simulator/parallel_config.hpp"
#include "simulator/rank_layout.hpp"

namespace shardplan::executor {

class MpiRuntime;

enum class Backend { mpi, nccl };

// A pipeline message: an activation going on to the next virtual stage, or the gradient of
// one coming back.
enum class PipeKind { activation, gradient };

// The group a pipeline message travels on and the peer's rank in it.
struct PipeEnd {
  Communicator* comm = nullptr;
  int peer = 0;
};

struct RankCoordinates {
  int world = 0;
  int tp = 0;
  int dp = 0;  // the data-parallel index: which micro-batches this rank reads
  int cp = 0;  // which part of the sequence (context parallel)
  int pp = 0;
  int shard = 0;    // index within the sharding group (dp x cp ranks)
  int replica = 0;  // which sharding group (MiCS)
  int ep = 0;       // index within the expert group (which experts this rank holds)
  int edp = 0;      // index within the expert-data group
};

class ProcessGroups {
 public:
  // Throws InputError when the plan's devices differ from the world size.
  ProcessGroups(const MpiRuntime& runtime, const simulator::ParallelConfig& cfg, Backend backend, double timeout_s,
                const std::string& plan_source);
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  [[nodiscard]] const RankCoordinates& coords() const { return coords_; }
  [[nodiscard]] Communicator& world() const { return *world_; }
  [[nodiscard]] Communicator& tp() const { return *tp_; }
  [[nodiscard]] Communicator& dp() const { return *dp_; }
  [[nodiscard]] Communicator& pp() const { return *pp_; }
  [[nodiscard]] Communicator& cp() const { return *cp_; }
  [[nodiscard]] Communicator& shard() const { return *shard_; }
  [[nodiscard]] Communicator& replica() const { return *replica_; }
  [[nodiscard]] Communicator* embedding() const { return embedding_.get(); }
  [[nodiscard]] Communicator& expert() const { return *expert_; }
  [[nodiscard]] Communicator& expert_data() const { return *expert_data_; }
  // Expert tensor parallel size: tp (experts split over the tp group) or 1 (whole experts).
  [[nodiscard]] int expert_tp() const { return etp_; }
  [[nodiscard]] Backend backend() const { return backend_; }
  // Where this stage sends (`sending`) or receives messages of `kind`: activations go to the
  // next stage and come from the previous one, gradients the other way, both wrapping around
  // from the last stage to the first for interleaved schedules.
  //   MPI   the pp group; the caller's tags match the messages in any order.
  //   NCCL  a two-rank link per (ordered stage pair, kind), each on a side stream of its own:
  //         a link carries one direction only, so its messages match in issue order, which is
  //         the same on both ends (the k-th forward, or backward, of every stage handles the
  //         same chunk and micro-batch in every schedule: simulator::pipeline_stage_order), and
  //         a send never waits behind a receive or another group's collective.
  //   A V (zbv) sends its second chunk's messages the other way (`reverse`): activations to the
  //   previous stage, gradients to the next, on links of their own.
  [[nodiscard]] PipeEnd pipe(PipeKind kind, bool sending, bool reverse = false) const;
  // One line: "rank 3: tp 1/2, dp 1/2 (shard 1/2, replica 0/1), pp 0/1".
  [[nodiscard]] std::string describe() const;

 private:
  void build_links(const simulator::ParallelConfig& cfg, int pipeline_id, double timeout_s);
  void build_expert_groups(const simulator::ParallelConfig& cfg, const simulator::RankLayout& layout, double timeout_s,
                           const std::string& plan_source);

  RankCoordinates coords_;
  Backend backend_;
  int etp_ = 1;
  std::unique_ptr<Communicator> world_, tp_, dp_, pp_, cp_, shard_, replica_, embedding_, expert_, expert_data_;
  // NCCL only, pp > 1: links_[a] carries activations stage a -> a+1, links_[pp + a] gradients
  // stage a+1 -> a (indices mod pp); null where this rank is not an end of the link.
  std::vector<std::unique_ptr<Communicator>> links_;
};

}  // namespace shardplan::executor
