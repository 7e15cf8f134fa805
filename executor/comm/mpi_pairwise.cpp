#include "mpi_pairwise.hpp"

#include <climits>
#include <cstdlib>
#include <vector>

#include "executor/errors.hpp"
#include "mpi_communicator.hpp"

namespace shardplan::executor {

namespace pairwise {  // named, not anonymous: the comm files share a unity-build unit

bool is_16bit(const torch::Tensor& t) { return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf; }

int bytes_count(int64_t bytes, const char* what) {
  EXECUTOR_CHECK(bytes <= INT_MAX, std::string(what) + ": a block over 2^31 bytes; split the message");
  return static_cast<int>(bytes);
}

// Receive buffers for the peers' blocks: plain host memory, like the temporary buffers MPI's
// own collectives allocate, so tensor accounting counts neither.
struct HostBuffer {
  explicit HostBuffer(int64_t bytes) : data(bytes > 0 ? std::malloc(static_cast<size_t>(bytes)) : nullptr) {
    EXECUTOR_CHECK(bytes == 0 || data != nullptr, "pairwise collective: out of host memory for a receive buffer");
  }
  ~HostBuffer() { std::free(data); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data;
};

// own += the sum of peers' rows. own: (n), peers: (p-1, n); 16-bit in fp32, rounded once.
void add_peers(torch::Tensor own, const torch::Tensor& peers) {
  torch::NoGradGuard no_grad;
  if (peers.size(0) == 0 || own.numel() == 0) return;
  if (is_16bit(own)) {
    torch::Tensor acc = own.to(torch::kFloat);
    acc.add_(peers.to(torch::kFloat).sum(0));
    own.copy_(acc);
  } else if (peers.size(0) == 1) {
    own.add_(peers[0]);
  } else {
    own.add_(peers.sum(0));
  }
}

// Block j of N elements over p ranks: N/p elements, one more for the first N % p.
int64_t block_len(int64_t N, int p, int j) { return N / p + (j < N % p ? 1 : 0); }
int64_t block_start(int64_t N, int p, int j) { return j * (N / p) + std::min<int64_t>(j, N % p); }

// Slot of peer j's block in a (p-1)-row receive buffer: rank order without `me`.
int slot(int j, int me) { return j < me ? j : j - 1; }

// One Ialltoallv in which rank `me` sends `send_len[j]` elements from element `send_at[j]` of
// `send` to each peer j and receives `recv_len` elements from each into its slot of `recv`.
void post_exchange(MpiCommunicator& comm, const void* send, const std::vector<int64_t>& send_at,
                   const std::vector<int64_t>& send_len, void* recv, int64_t recv_len, int64_t elem, MPI_Request* req) {
  const int p = comm.size(), me = comm.rank();
  const auto P = static_cast<size_t>(p);
  std::vector<int> sc(P, 0), sd(P, 0), rc(P, 0), rd(P, 0);
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    const auto J = static_cast<size_t>(j);
    sc[J] = bytes_count(send_len[J] * elem, "reduce_scatter");
    sd[J] = bytes_count(send_at[J] * elem, "reduce_scatter");
    rc[J] = bytes_count(recv_len * elem, "reduce_scatter");
    rd[J] = bytes_count(slot(j, me) * recv_len * elem, "reduce_scatter");
  }
  static char scratch[2] = {0, 0};  // MPI wants valid buffers even for zero bytes
  comm.check_rc(MPI_Ialltoallv(send != nullptr ? send : &scratch[0], sc.data(), sd.data(), MPI_BYTE,
                               recv != nullptr ? recv : &scratch[1], rc.data(), rd.data(), MPI_BYTE, comm.comm(), req),
                "reduce_scatter");
}

// What both exchanges hold: the group, the request in flight, whether it is done. A work
// destroyed before its wait() completes it quietly (the error, if any, is the failing peer's).
class PairwiseWork : public Work {
 public:
  explicit PairwiseWork(MpiCommunicator& comm) : comm_(comm) {}
  PairwiseWork(const PairwiseWork&) = delete;
  PairwiseWork& operator=(const PairwiseWork&) = delete;

 protected:
  void finish_quietly() {
    if (done_ || req_ == MPI_REQUEST_NULL) return;
    try {
      wait();
    } catch (...) {  // destructor: the error was (or will be) reported by the failing peer
    }
  }
  MpiCommunicator& comm_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

class ReduceScatterWork final : public PairwiseWork {
 public:
  ReduceScatterWork(MpiCommunicator& comm, torch::Tensor out, torch::Tensor in)
      : PairwiseWork(comm),
        out_(out.view({-1})),
        in_(in.view({-1})),  // flat views: blocks of whatever shape
        recv_(static_cast<int64_t>(out_.nbytes()) * (comm.size() - 1)) {
    const int p = comm.size();
    const int64_t n = out_.numel();
    std::vector<int64_t> at(static_cast<size_t>(p)), len(static_cast<size_t>(p), n);
    for (int j = 0; j < p; ++j) at[static_cast<size_t>(j)] = j * n;
    post_exchange(comm, in_.data_ptr(), at, len, recv_.data, n, static_cast<int64_t>(out_.element_size()), &req_);
  }
  void wait() override {
    if (done_) return;
    comm_.wait(req_, "reduce_scatter");
    done_ = true;
    const int64_t n = out_.numel();
    out_.copy_(in_.narrow(0, comm_.rank() * n, n));
    add_peers(out_, peers());
  }
  ~ReduceScatterWork() override { finish_quietly(); }

 private:
  torch::Tensor peers() const {  // (p-1, n), a view of the receive buffer
    return torch::from_blob(recv_.data, {comm_.size() - 1, out_.numel()}, out_.options());
  }
  torch::Tensor out_, in_;  // in_: kept alive for MPI until the exchange completes
  HostBuffer recv_;
};

class AllReduceWork final : public PairwiseWork {
 public:
  AllReduceWork(MpiCommunicator& comm, torch::Tensor t)
      : PairwiseWork(comm),
        t_(std::move(t)),
        N_(t_.numel()),
        recv_(block_len(N_, comm.size(), comm.rank()) * static_cast<int64_t>(t_.element_size()) * (comm.size() - 1)) {
    const int p = comm.size();
    std::vector<int64_t> at(static_cast<size_t>(p)), len(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) {
      at[static_cast<size_t>(j)] = block_start(N_, p, j);
      len[static_cast<size_t>(j)] = block_len(N_, p, j);
    }
    post_exchange(comm, t_.data_ptr(), at, len, recv_.data, block_len(N_, p, comm.rank()),
                  static_cast<int64_t>(t_.element_size()), &req_);
  }
  void wait() override {
    if (done_) return;
    const int p = comm_.size(), me = comm_.rank();
    comm_.wait(req_, "all_reduce");
    const int64_t n = block_len(N_, p, me);
    torch::Tensor flat = t_.view({N_});
    add_peers(flat.narrow(0, block_start(N_, p, me), n), torch::from_blob(recv_.data, {p - 1, n}, t_.options()));
    // The summed blocks to every rank, in place: t's block j comes from rank j.
    const auto elem = static_cast<int64_t>(t_.element_size());
    std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) {
      counts[static_cast<size_t>(j)] = bytes_count(block_len(N_, p, j) * elem, "all_reduce");
      displs[static_cast<size_t>(j)] = bytes_count(block_start(N_, p, j) * elem, "all_reduce");
    }
    comm_.check_rc(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, t_.data_ptr(), counts.data(), displs.data(), MPI_BYTE,
                                   comm_.comm(), &req_),
                   "all_reduce");
    comm_.wait(req_, "all_reduce");
    done_ = true;
  }
  ~AllReduceWork() override { finish_quietly(); }

 private:
  torch::Tensor t_;
  int64_t N_;
  HostBuffer recv_;
};

}  // namespace pairwise

std::unique_ptr<Work> pairwise_reduce_scatter(MpiCommunicator& comm, torch::Tensor out, torch::Tensor in) {
  return std::make_unique<pairwise::ReduceScatterWork>(comm, std::move(out), std::move(in));
}

std::unique_ptr<Work> pairwise_all_reduce(MpiCommunicator& comm, torch::Tensor t) {
  EXECUTOR_CHECK(t.numel() >= comm.size(), "pairwise_all_reduce: fewer elements than ranks");
  return std::make_unique<pairwise::AllReduceWork>(comm, std::move(t));
}

}  // namespace shardplan::executor
