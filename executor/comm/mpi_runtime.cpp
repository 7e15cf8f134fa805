#include "mpi_runtime.hpp"

#include <mpi.h>

#include <exception>
#include <vector>

#include "executor/errors.hpp"

namespace shardplan::executor {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // FUNNELED: only the main thread calls MPI. On CPU, LibTorch runs backward (and so the
    // collectives inside autograd functions) on the calling thread.
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiRuntime::agree(const std::string& my_error) const {
  const int mine = my_error.empty() ? world_size_ : world_rank_;
  int first = world_size_;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw CommError("MPI_Allreduce failed while ranks compared their status");
  if (first == world_size_) return {};
  int length = first == world_rank_ ? static_cast<int>(my_error.size()) : 0;
  MPI_Bcast(&length, 1, MPI_INT, first, MPI_COMM_WORLD);
  std::string message(static_cast<size_t>(length), '\0');
  if (first == world_rank_) message = my_error;
  MPI_Bcast(message.data(), length, MPI_CHAR, first, MPI_COMM_WORLD);
  return world_size_ > 1 ? "rank " + std::to_string(first) + ": " + message : message;
}

void MpiRuntime::abort(int code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::terminate();  // MPI_Abort does not return; without MPI there is nothing else to end
}

}  // namespace shardplan::executor
