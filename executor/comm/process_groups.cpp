#include "process_groups.hpp"

#include <mpi.h>

#include "executor/errors.hpp"
#include "mpi_communicator.hpp"
#include "mpi_runtime.hpp"
#include "simulator/rank_layout.hpp"
#ifdef SHARDPLAN_WITH_NCCL
#include "nccl_communicator.hpp"
#endif

namespace shardplan::executor {

namespace {

using simulator::Dim;

// MPI sub-communicator of the ranks with the same `color`, ordered by `key`.
MPI_Comm split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &out) != MPI_SUCCESS)
    throw CommError("MPI_Comm_split failed while building the process groups");
  return out;
}

std::unique_ptr<Communicator> make(MPI_Comm comm, const std::string& name, Backend backend, double timeout_s,
                                   bool side_stream = false) {
#ifdef SHARDPLAN_WITH_NCCL
  if (backend == Backend::nccl)
    return std::make_unique<NcclCommunicator>(comm, name, timeout_s,
                                              side_stream ? NcclStream::side : NcclStream::legacy);
#else
  (void)side_stream;
#endif
  EXECUTOR_CHECK(backend == Backend::mpi, "this shardrun was built without NCCL");
  return std::make_unique<MpiCommunicator>(comm, name, timeout_s);
}

}  // namespace

ProcessGroups::ProcessGroups(const MpiRuntime& runtime, const simulator::ParallelConfig& cfg, Backend backend,
                             double timeout_s, const std::string& plan_source)
    : backend_(backend) {
  const int world = runtime.world_size();
  if (cfg.devices() != world)
    throw InputError(plan_source + ": field 'config': the plan needs " + std::to_string(cfg.devices()) + " ranks (tp " +
                     std::to_string(cfg.tp) + " x cp " + std::to_string(cfg.cp) + " x dp " + std::to_string(cfg.dp) +
                     " x pp " + std::to_string(cfg.pp) + ") but mpirun started " + std::to_string(world) +
                     "; run mpirun -np " + std::to_string(cfg.devices()));
  const int shard_size = cfg.shard_group();
  if (shard_size < 1 || cfg.dp % shard_size != 0)
    throw InputError(plan_source + ": field 'config.sharding_degree': expected a divisor of data_parallel " +
                     std::to_string(cfg.dp) + ", got " + std::to_string(shard_size));
  // Devices per node only affect placement, not membership: any value works here.
  const simulator::RankLayout layout(cfg.rank_order, cfg.tp, cfg.cp, cfg.dp, cfg.pp, 1);
  const int r = runtime.world_rank();
  auto coord = [&](Dim d) { return (r / layout.stride(d)) % layout.size(d); };
  coords_.world = r;
  coords_.tp = coord(Dim::tp);
  coords_.cp = coord(Dim::cp);
  coords_.dp = coord(Dim::dp);
  coords_.pp = coord(Dim::pp);
  // Dense weights are replicated over dp x cp (a cp rank holds every weight, only a part of the
  // sequence): their gradients are reduced, and ZeRO-sharded, over the dp x cp ranks with the
  // same tp and pp coordinates (Megatron-Core's data-parallel group "with context parallel").
  // Position in it: dp-major, cp-minor; a MiCS sharding group is `shard_size` dp ranks x all cp.
  const int cp = cfg.cp;
  coords_.shard = (coords_.dp % shard_size) * cp + coords_.cp;
  coords_.replica = coords_.dp / shard_size;

  // Colour = the lowest world rank of the group (unique per group), key = position in it.
  auto base_without = [&](Dim d) { return r - coord(d) * layout.stride(d); };
  const int dp_stride = layout.stride(Dim::dp), cp_stride = layout.stride(Dim::cp);
  const int dpcp_base = base_without(Dim::dp) - coords_.cp * cp_stride;
  world_ = make(MPI_COMM_WORLD, "world", backend, timeout_s);
  tp_ = make(split(base_without(Dim::tp), coords_.tp), "tp", backend, timeout_s);
  dp_ = make(split(dpcp_base, coords_.dp * cp + coords_.cp), cp > 1 ? "dp-cp" : "dp", backend, timeout_s);
  pp_ = make(split(base_without(Dim::pp), coords_.pp), "pp", backend, timeout_s);
  cp_ = make(split(base_without(Dim::cp), coords_.cp), "cp", backend, timeout_s);
  shard_ =
      make(split(dpcp_base + coords_.replica * shard_size * dp_stride, coords_.shard), "shard", backend, timeout_s);
  replica_ = make(split(dpcp_base + (coords_.dp % shard_size) * dp_stride + coords_.cp * cp_stride, coords_.replica),
                  "replica", backend, timeout_s);
  const bool end_stage = coords_.pp == 0 || coords_.pp == cfg.pp - 1;
  MPI_Comm emb = split(end_stage ? base_without(Dim::pp) : MPI_UNDEFINED, coords_.pp);
  if (emb != MPI_COMM_NULL) embedding_ = make(emb, "embedding", backend, timeout_s);
  if (backend == Backend::nccl && cfg.pp > 1) build_links(cfg, base_without(Dim::pp), timeout_s);
  build_expert_groups(cfg, layout, timeout_s, plan_source);
}

void ProcessGroups::build_expert_groups(const simulator::ParallelConfig& cfg, const simulator::RankLayout& layout,
                                        double timeout_s, const std::string& plan_source) {
  // A stage's ranks in rank order (RankLayout::expert_group): the j-th is world rank
  // j % sp + (j / sp) * sp * P + stage * sp, with sp the pp stride and P the pp size.
  const int r = coords_.world, sp = layout.stride(Dim::pp), P = layout.size(Dim::pp);
  const int stage_base = coords_.pp * sp;
  const int j = r % sp + (r / (sp * P)) * sp;
  auto world_of = [&](int k) { return k % sp + (k / sp) * sp * P + stage_base; };
  const int etp = cfg.expert_tp(), ep = cfg.ep;
  const int n = cfg.tp * cfg.cp * cfg.dp;
  if (ep < 1 || etp < 1 || n % (etp * ep) != 0)
    throw InputError(plan_source + ": field 'config.expert_parallel': ep " + std::to_string(ep) + " x etp " +
                     std::to_string(etp) + " must divide the stage's tp x cp x dp = " + std::to_string(n) + " ranks");
  // shardrun's expert MLPs are either split like the dense MLP (etp = tp: the expert-tensor group
  // must be the tp group) or whole on each rank (etp = 1, each tp rank routing its own tokens).
  const int etp_first = j - j % etp;
  if (etp != 1 && etp != cfg.tp)
    throw InputError(plan_source +
                     ": field 'config.expert_tensor_parallel': shardrun runs expert tensor parallelism "
                     "equal to tp or 1 (etp " +
                     std::to_string(etp) + ", tp " + std::to_string(cfg.tp) + ")");
  for (int i = 0; i < etp && etp > 1; ++i)
    if (world_of(etp_first + i) != r + (i - coords_.tp) * layout.stride(Dim::tp))
      throw InputError(plan_source +
                       ": field 'config.expert_tensor_parallel': shardrun runs expert tensor parallelism "
                       "equal to tp over the tp group (etp " +
                       std::to_string(etp) + ", tp " + std::to_string(cfg.tp) + ", rank order " + cfg.rank_order + ")");
  etp_ = etp;
  const int t_idx = j % etp, e_idx = (j / etp) % ep, d_idx = j / (etp * ep);
  coords_.ep = e_idx;
  coords_.edp = d_idx;
  // Colour = the lowest world rank of the group, key = position in it.
  expert_ = make(split(world_of(t_idx + d_idx * etp * ep), e_idx), "expert", backend_, timeout_s);
  expert_data_ = make(split(world_of(t_idx + e_idx * etp), d_idx), "expert_data", backend_, timeout_s);
}

void ProcessGroups::build_links(const simulator::ParallelConfig& cfg, int pipeline_id, double timeout_s) {
  const int p = cfg.pp;
  const int me = coords_.pp;
  const bool v = simulator::v_shaped(cfg.schedule);
  links_.resize(static_cast<size_t>(4 * p));
  for (int l = 0; l < 4 * p; ++l) {
    const bool reverse = l >= 2 * p;  // a V's way back: activations a+1 -> a, gradients a -> a+1
    if (reverse && !v) continue;
    const int a = l % p;
    const int b = (a + 1) % p;
    // Links from the last stage back to the first exist for interleaved schedules only.
    if (a == p - 1 && (cfg.virtual_stages <= 1 || v)) continue;
    const bool activation = l % (2 * p) < p;
    const bool up = activation != reverse;  // the message goes a -> a+1
    const int sender = up ? a : b;
    const int receiver = up ? b : a;
    const bool member = me == sender || me == receiver;
    // Every rank takes part in every split (MPI_Comm_split is collective over the world).
    MPI_Comm link = split(member ? pipeline_id : MPI_UNDEFINED, me == sender ? 0 : 1);
    if (link == MPI_COMM_NULL) continue;
    const std::string name = std::string(activation ? "pp-act-" : "pp-grad-") + (reverse ? "v-" : "") +
                             std::to_string(sender) + ">" + std::to_string(receiver);
    links_[static_cast<size_t>(l)] = make(link, name, backend_, timeout_s, true);
  }
}

PipeEnd ProcessGroups::pipe(PipeKind kind, bool sending, bool reverse) const {
  const int p = pp_->size();
  const int me = coords_.pp;
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  const bool towards_next = ((kind == PipeKind::activation) == sending) != reverse;
  if (links_.empty()) return {pp_.get(), towards_next ? next : prev};
  // The link's lower stage a (a -> a+1 for activations, a+1 -> a for gradients; reversed in a V).
  const int a = towards_next ? me : prev;
  const int index = (reverse ? 2 * p : 0) + (kind == PipeKind::activation ? 0 : p) + a;
  Communicator* link = links_[static_cast<size_t>(index)].get();
  EXECUTOR_CHECK(link != nullptr, "no pipeline link for this message (a wrap-around link without interleaving?)");
  return {link, sending ? 1 : 0};  // ranks in a link: the sender is 0, the receiver 1
}

ProcessGroups::~ProcessGroups() = default;

std::string ProcessGroups::describe() const {
  auto of = [](int i, const Communicator& c) { return std::to_string(i) + "/" + std::to_string(c.size()); };
  return "rank " + std::to_string(coords_.world) + ": tp " + of(coords_.tp, *tp_) + ", dp " + of(coords_.dp, *dp_) +
         (cp_->size() > 1 ? ", cp " + of(coords_.cp, *cp_) : "") + " (shard " + of(coords_.shard, *shard_) +
         ", replica " + of(coords_.replica, *replica_) + "), pp " + of(coords_.pp, *pp_) +
         (expert_->size() > 1
              ? ", ep " + of(coords_.ep, *expert_) + " (expert data " + of(coords_.edp, *expert_data_) + ")"
              : "") +
         ", backend " + world_->backend();
}

}  // namespace shardplan::executor
