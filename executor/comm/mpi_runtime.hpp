#pragma once
// MpiRuntime: MPI_Init_thread / MPI_Finalize for one shardrun process, plus the facts every
// rank needs about the job (world rank/size, rank within the node). Abort ends the whole job:
// used when a rank hits an error its peers cannot know about, so nobody waits forever.
#include <string>

namespace shardplan::executor {

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  [[nodiscard]] int world_rank() const { return world_rank_; }
  [[nodiscard]] int world_size() const { return world_size_; }
  [[nodiscard]] int local_rank() const { return local_rank_; }  // rank within the node
  [[nodiscard]] int local_size() const { return local_size_; }  // ranks on this node

  // Every rank passes its own outcome (empty = ok); returns the first failing rank's message
  // prefixed with "rank N: " (empty if all are ok) on every rank. Collective over the world.
  [[nodiscard]] std::string agree(const std::string& my_error) const;

  // Ends every rank of the job with `code` (MPI_Abort on the world communicator).
  [[noreturn]] static void abort(int code);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

}  // namespace shardplan::executor
