#pragma once
// Balanced reduce-scatter and all-reduce on MPI for the MpiCommunicator, from all-to-alls and
// an all-gather (Thakur, Rabenseifner and Gropp 2005, "Optimization of collective communication
// operations in MPICH", IJHPCA 19(1): §4.4 the pairwise-exchange reduce-scatter, §4.5
// Rabenseifner's all-reduce as a reduce-scatter followed by an all-gather). Every rank sends
// and adds (p - 1)/p of the buffer.
//
// Why not MPI's own: Open MPI's non-blocking collectives (libnbc, the only ones with MPI_I*)
// reduce an in-place all-reduce on p < 4 ranks, or any below 64 KiB, with a binomial tree to
// rank 0 and broadcast it back (ompi/mca/coll/libnbc/nbc_iallreduce.c, allred_sched_diss), and a
// reduce-scatter as a reduce to rank 0 and a linear scatter (nbc_ireduce_scatter_block.c):
// rank 0 receives and adds every buffer while its peers wait. On 2 CPU ranks, `perf` of ZeRO-3
// showed it as one rank spending ~15 % of its time waiting for the other.
//
//   reduce-scatter  in: (p*n) per rank          -> out: (n) = sum over ranks of block rank()
//   all-reduce      t: (N), blocks of N/p or N/p+1 elements -> t: (N) = sum over ranks
// Sums of 16-bit floats are taken in fp32 and rounded once per element.
#include <memory>

#include "communicator.hpp"

namespace shardplan::executor {

class MpiCommunicator;

// Starts the exchange; wait() completes it and adds this rank's block. `in` is left as it was.
std::unique_ptr<Work> pairwise_reduce_scatter(MpiCommunicator& comm, torch::Tensor out, torch::Tensor in);

// Starts the reduce-scatter part in place on `t`; wait() adds this rank's block and all-gathers
// the summed blocks into `t` (every rank ends with the same bits). Needs t.numel() >= size().
std::unique_ptr<Work> pairwise_all_reduce(MpiCommunicator& comm, torch::Tensor t);

}  // namespace shardplan::executor
