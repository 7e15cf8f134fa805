#pragma once
// What every rank of MPI_COMM_WORLD agrees on while profiling: whether any rank wants another
// round (or to stop), and a figure combined over the ranks (MPI_MAX: the slowest rank's time).
// Collective: every rank calls them, in the same order.
#include <mpi.h>

namespace shardplan::executor {

inline bool any_rank(bool mine) {
  int v = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return all != 0;
}

inline double reduce_over_ranks(double v, MPI_Op op) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return out;
}

}  // namespace shardplan::executor
