#include "mpi_communicator.hpp"

#include <chrono>
#include <climits>
#include <thread>

#include "executor/errors.hpp"
#include "mpi_pairwise.hpp"

namespace shardplan::executor {

namespace {

using Clock = std::chrono::steady_clock;

void check(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError("MPI " + std::string(what) + " on group '" + group +
                  "' failed: " + std::string(text, static_cast<size_t>(len)));
}

// The MPI type for arithmetic on dtype `d` (16-bit floats are reduced in fp32 by the caller).
MPI_Datatype mpi_type(torch::ScalarType d) {
  switch (d) {
    case torch::kFloat:
      return MPI_FLOAT;
    case torch::kDouble:
      return MPI_DOUBLE;
    case torch::kLong:
      return MPI_INT64_T;
    case torch::kInt:
      return MPI_INT32_T;
    case torch::kByte:
      return MPI_UINT8_T;
    case torch::kChar:
      return MPI_INT8_T;
    case torch::kBool:
      return MPI_C_BOOL;
    default:
      break;
  }
  EXECUTOR_CHECK(false, std::string("no MPI datatype for ") + c10::toString(d));
}

bool is_16bit(const torch::Tensor& t) { return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf; }

// MPI has no 16-bit float types. 16-bit sums travel as MPI_UINT16_T (2 bytes per element on the
// wire, as with NCCL) and are added by a user-defined op: in fp32, each partial sum rounded to
// the tensor's dtype. A 16-bit max is rare (overflow checks): it goes through an fp32 copy.
template <typename T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

template <typename T>
MPI_Op make_sum_op() {
  MPI_Op op = MPI_OP_NULL;
  MPI_Op_create(&sum_16bit<T>, /*commute=*/1, &op);
  return op;
}

MPI_Op sum_op_16bit(torch::ScalarType d) {
  static const MPI_Op bf16 = make_sum_op<c10::BFloat16>();  // freed by MPI_Finalize
  static const MPI_Op fp16 = make_sum_op<c10::Half>();
  return d == torch::kBFloat16 ? bf16 : fp16;
}

bool needs_upcast(const torch::Tensor& t, ReduceOp op) { return is_16bit(t) && op != ReduceOp::sum; }

MPI_Datatype wire_type(const torch::Tensor& t) { return is_16bit(t) ? MPI_UINT16_T : mpi_type(t.scalar_type()); }

MPI_Op wire_op(const torch::Tensor& t, ReduceOp op) {
  if (is_16bit(t)) return sum_op_16bit(t.scalar_type());  // needs_upcast sent the max elsewhere
  return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
}

int checked_count(int64_t n, const char* what) {
  EXECUTOR_CHECK(n <= INT_MAX, std::string(what) + ": message over 2^31 elements; split it");
  return static_cast<int>(n);
}

void check_dense(const torch::Tensor& t, const char* what) {
  EXECUTOR_CHECK(t.defined() && t.is_contiguous() && t.device().is_cpu(),
                 std::string(what) + ": the MPI backend needs contiguous CPU tensors");
}

// A request plus what must stay alive (and be cast back) until it completes.
class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator& comm, const char* what, torch::Tensor result, torch::Tensor staged, torch::Tensor input)
      : comm_(comm), what_(what), result_(std::move(result)), staged_(std::move(staged)), input_(std::move(input)) {}
  MPI_Request* request() { return &req_; }
  void wait() override {
    if (done_) return;
    comm_.wait(req_, what_);
    done_ = true;
    if (staged_.defined() && !staged_.is_same(result_)) result_.copy_(staged_);
  }
  bool completed() override {
    if (done_) return true;
    int flag = 0;
    check(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what_, comm_.name());
    if (!flag) return false;
    done_ = true;
    if (staged_.defined() && !staged_.is_same(result_)) result_.copy_(staged_);
    return true;
  }
  ~MpiWork() override {
    if (!done_ && req_ != MPI_REQUEST_NULL) {
      try {
        wait();
      } catch (...) {  // destructor: the error was (or will be) reported by the failing peer
      }
    }
  }

 private:
  MpiCommunicator& comm_;
  const char* what_;
  torch::Tensor result_;  // what the caller sees
  torch::Tensor staged_;  // what MPI writes into (fp32 copy for 16-bit floats)
  torch::Tensor input_;   // kept alive for MPI
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, double timeout_s)
    : comm_(comm), name_(std::move(name)), timeout_s_(timeout_s) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_rc(int rc, const char* what) const { check(rc, what, name_); }

void MpiCommunicator::wait(MPI_Request& req, const char* what) {
  const auto start = Clock::now();
  int done = 0;
  for (int spins = 0;; ++spins) {
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what, name_);
    if (done) break;
    if (spins > 256) {
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > timeout_s_)
        throw CommError(std::string(what) + " on group '" + name_ + "' timed out after " +
                        std::to_string(static_cast<int>(waited)) + " s (a peer rank died, hung, or diverged)");
      std::this_thread::yield();
    }
  }
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Work> MpiCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  check_dense(t, "all_reduce");
  // Sums of 4 KiB and more as a balanced reduce-scatter + all-gather (mpi_pairwise.hpp: MPI's
  // non-blocking in-place all-reduce funnels everything through rank 0); below, a message is
  // latency-bound and MPI's binomial tree takes as many steps.
  constexpr int64_t kPairwiseMinBytes = 4096;
  if (op == ReduceOp::sum && size_ > 1 && static_cast<int64_t>(t.nbytes()) >= kPairwiseMinBytes && t.numel() >= size_) {
    count_call(static_cast<double>(t.nbytes()));
    return pairwise_all_reduce(*this, std::move(t));
  }
  torch::Tensor staged = needs_upcast(t, op) ? t.to(torch::kFloat) : t;
  auto work = std::make_unique<MpiWork>(*this, "all_reduce", t, staged, torch::Tensor());
  count_call(static_cast<double>(t.nbytes()));
  if (size_ == 1) {
    *work->request() = MPI_REQUEST_NULL;
    return work;
  }
  check(MPI_Iallreduce(MPI_IN_PLACE, staged.data_ptr(), checked_count(staged.numel(), "all_reduce"), wire_type(staged),
                       wire_op(staged, op), comm_, work->request()),
        "all_reduce", name_);
  return work;
}

void MpiCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) { start_all_reduce(t, op)->wait(); }

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(torch::Tensor t) {
  return start_all_reduce(std::move(t), ReduceOp::sum);
}

std::unique_ptr<Work> MpiCommunicator::all_gather_async(torch::Tensor out, torch::Tensor in) {
  check_dense(out, "all_gather");
  check_dense(in, "all_gather");
  EXECUTOR_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(),
                 "all_gather: out must hold size() * in.numel() elements of in's dtype");
  auto work = std::make_unique<MpiWork>(*this, "all_gather", out, out, in);
  count_call(static_cast<double>(out.nbytes()));
  const int bytes = checked_count(static_cast<int64_t>(in.nbytes()), "all_gather");
  check(MPI_Iallgather(in.data_ptr(), bytes, MPI_BYTE, out.data_ptr(), bytes, MPI_BYTE, comm_, work->request()),
        "all_gather", name_);
  return work;
}

void MpiCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) { all_gather_async(out, in)->wait(); }

// A balanced pairwise exchange, not MPI_Ireduce_scatter_block (mpi_pairwise.hpp says why).
std::unique_ptr<Work> MpiCommunicator::reduce_scatter_async(torch::Tensor out, torch::Tensor in) {
  check_dense(out, "reduce_scatter");
  check_dense(in, "reduce_scatter");
  EXECUTOR_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(),
                 "reduce_scatter: in must hold size() * out.numel() elements of out's dtype");
  count_call(static_cast<double>(in.nbytes()));
  return pairwise_reduce_scatter(*this, std::move(out), std::move(in));
}

void MpiCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in) {
  reduce_scatter_async(out, in)->wait();
}

void MpiCommunicator::broadcast(torch::Tensor& t, int root) {
  check_dense(t, "broadcast");
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibcast(t.data_ptr(), checked_count(static_cast<int64_t>(t.nbytes()), "broadcast"), MPI_BYTE, root, comm_,
                   &req),
        "broadcast", name_);
  count_call(static_cast<double>(t.nbytes()));
  wait(req, "broadcast");
}

void MpiCommunicator::send(const torch::Tensor& t, int peer) { send_async(t, peer, 0)->wait(); }

void MpiCommunicator::recv(torch::Tensor& t, int peer) { recv_async(t, peer, 0)->wait(); }

std::unique_ptr<Work> MpiCommunicator::send_async(torch::Tensor t, int peer, int tag) {
  check_dense(t, "send");
  EXECUTOR_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send: peer " + std::to_string(peer) + " invalid");
  auto work = std::make_unique<MpiWork>(*this, "send", torch::Tensor(), torch::Tensor(), t);
  count_call(static_cast<double>(t.nbytes()));
  check(MPI_Isend(t.data_ptr(), checked_count(static_cast<int64_t>(t.nbytes()), "send"), MPI_BYTE, peer, tag, comm_,
                  work->request()),
        "send", name_);
  return work;
}

std::unique_ptr<Work> MpiCommunicator::recv_async(torch::Tensor t, int peer, int tag) {
  check_dense(t, "recv");
  EXECUTOR_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv: peer " + std::to_string(peer) + " invalid");
  auto work = std::make_unique<MpiWork>(*this, "recv", t, torch::Tensor(), torch::Tensor());
  count_call(0);
  check(MPI_Irecv(t.data_ptr(), checked_count(static_cast<int64_t>(t.nbytes()), "recv"), MPI_BYTE, peer, tag, comm_,
                  work->request()),
        "recv", name_);
  return work;
}

void MpiCommunicator::all_to_all_v(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows) {
  const int64_t row_bytes = check_all_to_all_v(out, in, send_rows, recv_rows) * static_cast<int64_t>(in.element_size());
  check_dense(out, "all_to_all_v");
  check_dense(in, "all_to_all_v");
  // Counts and displacements in bytes (MPI_BYTE): any dtype, 16-bit floats included.
  const auto p = static_cast<size_t>(size_);
  std::vector<int> sc(p), sd(p), rc(p), rd(p);
  int64_t s_at = 0, r_at = 0;
  for (size_t i = 0; i < p; ++i) {
    sc[i] = checked_count(send_rows[i] * row_bytes, "all_to_all_v");
    rc[i] = checked_count(recv_rows[i] * row_bytes, "all_to_all_v");
    sd[i] = checked_count(s_at, "all_to_all_v");
    rd[i] = checked_count(r_at, "all_to_all_v");
    s_at += send_rows[i] * row_bytes;
    r_at += recv_rows[i] * row_bytes;
  }
  count_call(static_cast<double>(in.nbytes()));
  // MPI wants valid buffers even for zero bytes: a one-byte scratch stands in for empty tensors.
  char scratch[2] = {0, 0};
  void* send = in.numel() > 0 ? in.data_ptr() : &scratch[0];
  void* recv = out.numel() > 0 ? out.data_ptr() : &scratch[1];
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, comm_, &req),
        "all_to_all_v", name_);
  wait(req, "all_to_all_v");
}

void MpiCommunicator::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &req), "barrier", name_);
  wait(req, "barrier");
}

}  // namespace shardplan::executor
