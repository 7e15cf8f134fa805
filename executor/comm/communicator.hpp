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
//   send_recv_async(s, to, r, from, tag): both at once (a ring step)
//   all_to_all_v(out, in, send_rows, recv_rows)   counts in ROWS of dim 0 (a row = the
//     elements of one index of dim 0, the same width in `in` and `out`):
//     in: (sum(send_rows), ...)  rows [sum(send_rows[<p]), +send_rows[p]) go to rank p
//     out: (sum(recv_rows), ...) rows [sum(recv_rows[<p]), +recv_rows[p]) come from rank p
//     (MPI_Alltoallv semantics; zero counts allowed; recv_rows[p] must equal rank p's
//     send_rows[rank()], which the caller exchanges first, e.g. with a fixed-size one)
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/errors.hpp"

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
  // Whether it has completed, without blocking (MPI_Test); a backend that cannot tell says false.
  virtual bool completed() { return false; }
};

// Two operations waited on together.
class WorkPair final : public Work {
 public:
  WorkPair(std::unique_ptr<Work> a, std::unique_ptr<Work> b) : a_(std::move(a)), b_(std::move(b)) {}
  void wait() override {
    a_->wait();
    b_->wait();
  }

 private:
  std::unique_ptr<Work> a_, b_;
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
  // Variable-size all-to-all (see the shapes above); send_rows/recv_rows have size() entries.
  // The MPI and NCCL backends override it; this default serves one-rank groups (a copy).
  virtual void all_to_all_v(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                            const std::vector<int64_t>& recv_rows) {
    check_all_to_all_v(out, in, send_rows, recv_rows);
    EXECUTOR_CHECK(size() == 1, std::string("all_to_all_v: the ") + backend() + " backend has no all-to-all");
    count_call(static_cast<double>(in.nbytes()));
    out.copy_(in);
  }

  // Non-blocking variants (the tensors must stay alive and untouched until wait()).
  virtual std::unique_ptr<Work> all_reduce_async(torch::Tensor t) = 0;
  virtual std::unique_ptr<Work> reduce_scatter_async(torch::Tensor out, torch::Tensor in) = 0;
  virtual std::unique_ptr<Work> all_gather_async(torch::Tensor out, torch::Tensor in) = 0;
  virtual std::unique_ptr<Work> send_async(torch::Tensor t, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> recv_async(torch::Tensor t, int peer, int tag) = 0;
  // One exchange: `send` to rank `to` and `recv` from rank `from`, both posted before either is
  // waited on, so a ring where every rank sends and receives at once cannot deadlock (ring
  // attention). NCCL overrides it with one grouped ncclSend/ncclRecv.
  virtual std::unique_ptr<Work> send_recv_async(torch::Tensor send, int to, torch::Tensor recv, int from, int tag) {
    auto r = recv_async(std::move(recv), from, tag);
    auto s = send_async(std::move(send), to, tag);
    return std::make_unique<WorkPair>(std::move(r), std::move(s));
  }

  [[nodiscard]] const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  // Checks an all_to_all_v call (counts, shapes, dtype); returns the elements of one row.
  int64_t check_all_to_all_v(const torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                             const std::vector<int64_t>& recv_rows) const {
    const auto p = static_cast<size_t>(size());
    EXECUTOR_CHECK(send_rows.size() == p && recv_rows.size() == p, "all_to_all_v: one count per rank of the group");
    int64_t sent = 0, received = 0;
    for (size_t i = 0; i < p; ++i) {
      EXECUTOR_CHECK(send_rows[i] >= 0 && recv_rows[i] >= 0, "all_to_all_v: negative count");
      sent += send_rows[i];
      received += recv_rows[i];
    }
    EXECUTOR_CHECK(
        in.defined() && out.defined() && in.dim() >= 1 && out.dim() >= 1 && in.scalar_type() == out.scalar_type() &&
            in.size(0) == sent && out.size(0) == received && in.sizes().slice(1) == out.sizes().slice(1),
        "all_to_all_v: in must have sum(send_rows) rows, out sum(recv_rows), both the same row shape and dtype");
    int64_t row = 1;
    for (int64_t d = 1; d < in.dim(); ++d) row *= in.size(d);
    return row;
  }
  // One call handing `bytes` of payload to the backend.
  void count_call(double bytes) {
    stats_.bytes += bytes;
    ++stats_.calls;
  }
  CommStats stats_;
};

}  // namespace shardplan::executor
