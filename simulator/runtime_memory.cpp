// Communicator count of runtime_memory.hpp.
#include "runtime_memory.hpp"

#include "parallel_config.hpp"

namespace shardplan::simulator {

int communicators_used(const ParallelConfig& cfg) {
  int n = 0;
  if (cfg.tp > 1) ++n;
  if (cfg.cp > 1) ++n;
  if (cfg.pp > 1) ++n;
  if (cfg.dense_replicas() > 1) ++n;    // gradient reduction (Megatron's dp-with-cp group)
  if (cfg.shard_group() < cfg.dp) ++n;  // HSDP / MiCS: shard group and replica group
  if (cfg.ep > 1) ++n;
  if (cfg.ep > 1 && cfg.expert_dp() > 1) ++n;
  return n;
}

}  // namespace shardplan::simulator
