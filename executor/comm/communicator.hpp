#pragma once
// Communicator: one process group's collectives on tensors, with two backends behind the
// same interface — MPI for CPU tensors, NCCL for CUDA tensors (bootstrapped over MPI).
// Every blocking call and every Work::wait() gives up after the group's timeout and throws
// CommError, so a dead or stuck peer never leaves a rank hanging.
//
// Shapes (n = elements per rank, P = size()):
//   all_reduce(t)            t: (n) in place, summed (or max) over the group
//   all_gather(out, in)      in: (n), out: (P*n), rank r's block at [r*n, (r+1)*n)
//   reduce_scatter(out, in)  in: (P*n) summed over the group, out: (n) = block `rank()`
//   broadcast(t, root)       t: (n) in place
//   send(t, peer) / recv(t, peer): point-to-point, t contiguous
//   send_async(t, peer, tag) / recv_async(t, peer, tag): non-blocking point-to-point; the MPI
//     backend matches by tag (any order), NCCL in issue order per peer (tags ignored)
#include <torch/torch.h>

#include <memory>
#include <string>

namespace shardplan::executor {

enum class ReduceOp { sum, max };

// Time spent inside this group's communication calls (blocking calls and waits).
struct CommStats {
  double seconds = 0;
  double bytes = 0;  // payload bytes handed to the backend
  int64_t calls = 0;
};

// A non-blocking collective in flight; wait() blocks (up to the timeout) until it is done.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual const char* backend() const = 0;
  [[nodiscard]] virtual const std::string& name() const = 0;  // "tp", "dp", "shard", ...
  // Where the tensors handed to this group must live: the CPU (MPI) or its CUDA device (NCCL).
  [[nodiscard]] virtual torch::Device device() const { return torch::Device(torch::kCPU); }

  virtual void all_reduce(torch::Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  virtual void all_gather(torch::Tensor& out, const torch::Tensor& in) = 0;
  virtual void reduce_scatter(torch::Tensor& out, const torch::Tensor& in) = 0;
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  virtual void send(const torch::Tensor& t, int peer) = 0;
  virtual void recv(torch::Tensor& t, int peer) = 0;
  virtual void barrier() = 0;

  // Non-blocking variants (the tensors must stay alive and untouched until wait()).
  virtual std::unique_ptr<Work> all_reduce_async(torch::Tensor t) = 0;
  virtual std::unique_ptr<Work> reduce_scatter_async(torch::Tensor out, torch::Tensor in) = 0;
  virtual std::unique_ptr<Work> all_gather_async(torch::Tensor out, torch::Tensor in) = 0;
  virtual std::unique_ptr<Work> send_async(torch::Tensor t, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> recv_async(torch::Tensor t, int peer, int tag) = 0;

  [[nodiscard]] const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  // One call handing `bytes` of payload to the backend.
  void count_call(double bytes) {
    stats_.bytes += bytes;
    ++stats_.calls;
  }
  CommStats stats_;
};

}  // namespace shardplan::executor
