#pragma once
// MpiCommunicator: the Communicator interface over an MPI communicator, for CPU tensors.
// Collectives are issued non-blocking (MPI_I*) and completed by polling MPI_Test against a
// deadline, so a dead or stuck peer turns into a CommError instead of a hang. Reduce-scatters
// and all-reduces of 4 KiB and more run as balanced pairwise exchanges (mpi_pairwise.hpp).
// 16-bit floats have no MPI reduction type: they are reduced in fp32 and cast back.
#include <mpi.h>

#include "communicator.hpp"

namespace shardplan::executor {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed on destruction) unless it is MPI_COMM_WORLD.
  MpiCommunicator(MPI_Comm comm, std::string name, double timeout_s);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] const char* backend() const override { return "mpi"; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] MPI_Comm comm() const { return comm_; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void barrier() override;
  // MPI_Ialltoallv in bytes, polled against the timeout like the other collectives.
  void all_to_all_v(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                    const std::vector<int64_t>& recv_rows) override;

  std::unique_ptr<Work> all_reduce_async(torch::Tensor t) override;
  std::unique_ptr<Work> reduce_scatter_async(torch::Tensor out, torch::Tensor in) override;
  std::unique_ptr<Work> all_gather_async(torch::Tensor out, torch::Tensor in) override;
  std::unique_ptr<Work> send_async(torch::Tensor t, int peer, int tag) override;
  std::unique_ptr<Work> recv_async(torch::Tensor t, int peer, int tag) override;

  // Blocks until `req` completes or the timeout passes (then throws CommError naming `what`).
  void wait(MPI_Request& req, const char* what);
  // Throws CommError naming `what` and this group unless `rc` is MPI_SUCCESS.
  void check_rc(int rc, const char* what) const;

 private:
  std::unique_ptr<Work> start_all_reduce(torch::Tensor t, ReduceOp op);

  MPI_Comm comm_;
  std::string name_;
  double timeout_s_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace shardplan::executor
