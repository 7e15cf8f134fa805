#include "nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <exception>
#include <thread>

#include "executor/errors.hpp"

// Non-blocking communicators, ncclConfig_t, ncclCommFinalize and ncclGetLastError.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL 2.14 or newer"
#endif

namespace shardplan::executor {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The NCCL type of dtype `d`; bool travels as uint8 (fine for data movement and max).
ncclDataType_t nccl_type(torch::ScalarType d, const char* what) {
  switch (d) {
    case torch::kFloat:
      return ncclFloat32;
    case torch::kHalf:
      return ncclFloat16;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kDouble:
      return ncclFloat64;
    case torch::kLong:
      return ncclInt64;
    case torch::kInt:
      return ncclInt32;
    case torch::kByte:
    case torch::kBool:
      return ncclUint8;
    case torch::kChar:
      return ncclInt8;
    default:
      break;
  }
  EXECUTOR_CHECK(false, std::string(what) + ": no NCCL datatype for " + c10::toString(d));
}

// Polls the communicator's state until it leaves ncclInProgress or `timeout_s` passes (then
// returns ncclInProgress). A failing query is returned as the state.
ncclResult_t poll_state(ncclComm_t comm, double timeout_s) {
  const auto start = Clock::now();
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    if (spins > 256) {
      if (since(start) > timeout_s) return ncclInProgress;
      std::this_thread::yield();
    }
  }
}

// Makes `device` current for the scope of one call and restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device && cudaSetDevice(device) == cudaSuccess)
      switched_ = true;
  }
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace

// One enqueued op: its completion event and the tensors that must outlive it.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& comm, const char* what, std::vector<torch::Tensor> keep)
      : comm_(comm), what_(what), keep_(std::move(keep)) {}
  ~NcclWork() override {
    if (armed_ && !done_) {
      try {
        wait();
      } catch (...) {  // destructor: the error was (or will be) reported by the failing call
      }
    }
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  void wait() override {
    if (done_ || !armed_) return;
    comm_.wait_event(event_, what_);
    done_ = true;
    keep_.clear();
  }

  cudaEvent_t event_ = nullptr;
  bool armed_ = false;  // the event was recorded after the op

 private:
  NcclCommunicator& comm_;
  const char* what_;
  std::vector<torch::Tensor> keep_;
  bool done_ = false;
};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::string name, double timeout_s, NcclStream stream)
    : mpi_comm_(comm), name_(std::move(name)), timeout_s_(timeout_s) {
  MPI_Comm_set_errhandler(mpi_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mpi_comm_, &rank_);
  MPI_Comm_size(mpi_comm_, &size_);
  try {
    check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
    if (stream == NcclStream::side) {
      check_cuda(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      check_cuda(cudaEventCreateWithFlags(&legacy_done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    // Bootstrap: rank 0's unique id reaches every rank over MPI (non-blocking, with the timeout).
    ncclUniqueId id{};
    if (rank_ == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess) fail("ncclGetUniqueId", rc);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int done = 0;
    if (MPI_Ibcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, mpi_comm_, &req) != MPI_SUCCESS)
      throw CommError("MPI_Ibcast of the NCCL unique id on group '" + name_ + "' failed");
    const auto start = Clock::now();
    for (int spins = 0; !done; ++spins) {
      if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        throw CommError("MPI_Ibcast of the NCCL unique id on group '" + name_ + "' failed");
      if (!done && spins > 256) {
        if (since(start) > timeout_s_) timed_out("NCCL bootstrap (MPI_Ibcast of the unique id)", since(start));
        std::this_thread::yield();
      }
    }
    // Non-blocking init: returns at once (ncclInProgress); the state is polled with the timeout.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
    config.commName = name_.c_str();  // shows in NCCL's logs
#endif
    ncclComm_t created = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&created, size_, id, rank_, &config);
    comm_ = created;
    if (rc != ncclSuccess && rc != ncclInProgress) fail("ncclCommInitRankConfig", rc);
    if (comm_ == nullptr) fail("ncclCommInitRankConfig", ncclInternalError);
    settle("ncclCommInitRankConfig", timeout_s_);
  } catch (...) {  // the destructor will not run: release what the constructor took
    abort_comm();
    release_stream();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && mpi_comm_ != MPI_COMM_WORLD && mpi_comm_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_comm_);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  barrier_ = torch::Tensor();
  if (comm_ != nullptr) {
    // Clean shutdown waits for the peers (ncclCommFinalize is global); while an exception is
    // unwinding (a peer may be dead) or if that does not settle in time, abort instead.
    bool clean = !broken_ && std::uncaught_exceptions() == 0;
    if (clean) {
      DeviceScope scope(device_);
      const ncclResult_t rc = ncclCommFinalize(comm_);
      clean = (rc == ncclSuccess || rc == ncclInProgress) && poll_state(comm_, timeout_s_) == ncclSuccess;
      if (clean) ncclCommDestroy(comm_);
    }
    if (!clean) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  release_stream();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && mpi_comm_ != MPI_COMM_WORLD && mpi_comm_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_comm_);
}

void NcclCommunicator::release_stream() {
  if (legacy_done_ != nullptr) cudaEventDestroy(legacy_done_);
  if (side_ != nullptr) cudaStreamDestroy(side_);  // returns at once; pending work still completes
  legacy_done_ = nullptr;
  side_ = nullptr;
}

CUstream_st* NcclCommunicator::ready_stream() {
  if (side_ == nullptr) return cudaStreamLegacy;
  // The op's tensors were written (or, for a fresh receive buffer, last used) by kernels on the
  // legacy stream: the side stream starts after them.
  check_cuda(cudaEventRecord(legacy_done_, cudaStreamLegacy), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(side_, legacy_done_, 0), "cudaStreamWaitEvent");
  return side_;
}

void NcclCommunicator::abort_comm() {
  broken_ = true;
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);  // also stops this communicator's kernels still running on the device
  comm_ = nullptr;
}

void NcclCommunicator::fail(const char* what, int nccl_result) {
  std::string message = "NCCL " + std::string(what) + " on group '" + name_ +
                        "' failed: " + ncclGetErrorString(static_cast<ncclResult_t>(nccl_result));
  const char* last = ncclGetLastError(comm_);
  if (last != nullptr && *last != '\0') message += " (" + std::string(last) + ")";
  abort_comm();
  throw CommError(message + "; NCCL communicator aborted");
}

void NcclCommunicator::timed_out(const char* what, double waited) {
  abort_comm();
  throw CommError(std::string(what) + " on group '" + name_ + "' timed out after " +
                  std::to_string(static_cast<int>(waited)) +
                  " s (a peer rank died, hung, or diverged); NCCL communicator aborted");
}

void NcclCommunicator::check_cuda(int cuda_error, const char* what) {
  if (cuda_error == cudaSuccess) return;
  throw CommError("CUDA " + std::string(what) + " on group '" + name_ +
                  "' failed: " + cudaGetErrorString(static_cast<cudaError_t>(cuda_error)));
}

void NcclCommunicator::check_usable(const char* what) const {
  if (broken_ || comm_ == nullptr)
    throw CommError(std::string(what) + " on group '" + name_ +
                    "': the NCCL communicator was aborted after an earlier error or timeout");
}

void NcclCommunicator::check_tensor(const torch::Tensor& t, const char* what) const {
  EXECUTOR_CHECK(t.defined() && t.is_cuda() && t.is_contiguous() && t.device().index() == device_,
                 std::string(what) +
                     ": the NCCL backend needs contiguous CUDA tensors on cuda:" + std::to_string(device_) + " (got " +
                     (t.defined() ? t.device().str() + (t.is_contiguous() ? "" : ", non-contiguous") : "undefined") +
                     "); CPU tensors need the MPI backend");
}

void NcclCommunicator::settle(const char* what, double timeout_s) {
  const auto start = Clock::now();
  const ncclResult_t state = poll_state(comm_, timeout_s);
  if (state == ncclInProgress) timed_out(what, since(start));
  if (state != ncclSuccess) fail(what, state);
}

void NcclCommunicator::wait_event(CUevent_st* done, const char* what) {
  check_usable(what);
  const auto start = Clock::now();
  for (int spins = 0;; ++spins) {
    const cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) {
      abort_comm();
      check_cuda(q, what);
    }
    if (spins > 256) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
      if (rc != ncclSuccess) fail(what, rc);
      if (state != ncclSuccess && state != ncclInProgress) fail(what, state);
      const double waited = since(start);
      if (waited > timeout_s_) timed_out(what, waited);
      std::this_thread::yield();
    }
  }
  // An op can end early because a peer failed: the event fires, the data is invalid.
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
  if (rc != ncclSuccess) fail(what, rc);
  if (state != ncclSuccess && state != ncclInProgress) fail(what, state);
  stats_.seconds += since(start);
}

template <class Enqueue>
std::unique_ptr<NcclWork> NcclCommunicator::launch(const char* what, std::vector<torch::Tensor> keep, double bytes,
                                                   bool count, Enqueue&& enqueue) {
  check_usable(what);
  const auto start = Clock::now();
  DeviceScope scope(device_);
  auto work = std::make_unique<NcclWork>(*this, what, std::move(keep));
  check_cuda(cudaEventCreateWithFlags(&work->event_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaStream_t stream = ready_stream();
  const ncclResult_t rc = enqueue(stream);
  if (rc == ncclInProgress) settle(what, timeout_s_);  // non-blocking communicator: still enqueuing
  else if (rc != ncclSuccess) fail(what, rc);
  check_cuda(cudaEventRecord(work->event_, stream), "cudaEventRecord");
  work->armed_ = true;
  if (count) { count_call(bytes); }
  stats_.seconds += since(start);
  return work;
}

// A group of one (tp = 1, dp = 1, ...): the collective is the identity (a copy at most, queued on
// the current stream like the compute around it), so nothing is enqueued on NCCL and nothing
// waits on the host: a host wait here would drain the GPU's queue and count the compute still
// running as communication. The call is counted, as the MPI backend counts it.
std::unique_ptr<NcclWork> NcclCommunicator::alone(const char* what, double bytes) {
  check_usable(what);
  count_call(bytes);
  return std::make_unique<NcclWork>(*this, what, std::vector<torch::Tensor>{});  // never armed: wait() returns
}

std::unique_ptr<NcclWork> NcclCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  EXECUTOR_CHECK(op == ReduceOp::max || t.scalar_type() != torch::kBool, "all_reduce: sum of bool tensors");
  if (size_ == 1) return alone("all_reduce", static_cast<double>(t.nbytes()));
  const ncclDataType_t type = nccl_type(t.scalar_type(), "all_reduce");
  void* data = t.data_ptr();
  const auto n = static_cast<size_t>(t.numel());
  return launch("all_reduce", {t}, static_cast<double>(t.nbytes()), true, [&](cudaStream_t st) {
    return ncclAllReduce(data, data, n, type, op == ReduceOp::sum ? ncclSum : ncclMax, comm_, st);
  });
}

void NcclCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) { start_all_reduce(t, op)->wait(); }

std::unique_ptr<Work> NcclCommunicator::all_reduce_async(torch::Tensor t) {
  return start_all_reduce(std::move(t), ReduceOp::sum);
}

std::unique_ptr<Work> NcclCommunicator::all_gather_async(torch::Tensor out, torch::Tensor in) {
  check_tensor(out, "all_gather");
  check_tensor(in, "all_gather");
  EXECUTOR_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(),
                 "all_gather: out must hold size() * in.numel() elements of in's dtype");
  if (size_ == 1) {
    if (out.data_ptr() != in.data_ptr()) out.copy_(in);
    return alone("all_gather", static_cast<double>(out.nbytes()));
  }
  const ncclDataType_t type = nccl_type(in.scalar_type(), "all_gather");
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const auto n = static_cast<size_t>(in.numel());
  return launch("all_gather", {out, in}, static_cast<double>(out.nbytes()), true,
                [&](cudaStream_t st) { return ncclAllGather(src, dst, n, type, comm_, st); });
}

void NcclCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) { all_gather_async(out, in)->wait(); }

std::unique_ptr<Work> NcclCommunicator::reduce_scatter_async(torch::Tensor out, torch::Tensor in) {
  check_tensor(out, "reduce_scatter");
  check_tensor(in, "reduce_scatter");
  EXECUTOR_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(),
                 "reduce_scatter: in must hold size() * out.numel() elements of out's dtype");
  EXECUTOR_CHECK(in.scalar_type() != torch::kBool, "reduce_scatter: sum of bool tensors");
  if (size_ == 1) {
    if (out.data_ptr() != in.data_ptr()) out.copy_(in);
    return alone("reduce_scatter", static_cast<double>(in.nbytes()));
  }
  const ncclDataType_t type = nccl_type(in.scalar_type(), "reduce_scatter");
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const auto n = static_cast<size_t>(out.numel());
  return launch("reduce_scatter", {out, in}, static_cast<double>(in.nbytes()), true,
                [&](cudaStream_t st) { return ncclReduceScatter(src, dst, n, type, ncclSum, comm_, st); });
}

void NcclCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in) {
  reduce_scatter_async(out, in)->wait();
}

void NcclCommunicator::broadcast(torch::Tensor& t, int root) {
  check_tensor(t, "broadcast");
  EXECUTOR_CHECK(root >= 0 && root < size_, "broadcast: root " + std::to_string(root) + " outside the group");
  if (size_ == 1) {
    (void)alone("broadcast", static_cast<double>(t.nbytes()));
    return;
  }
  const ncclDataType_t type = nccl_type(t.scalar_type(), "broadcast");
  void* data = t.data_ptr();
  const auto n = static_cast<size_t>(t.numel());
  launch("broadcast", {t}, static_cast<double>(t.nbytes()), true, [&](cudaStream_t st) {
    return ncclBroadcast(data, data, n, type, root, comm_, st);
  })->wait();
}

void NcclCommunicator::send(const torch::Tensor& t, int peer) { send_async(t, peer, 0)->wait(); }

void NcclCommunicator::recv(torch::Tensor& t, int peer) { recv_async(t, peer, 0)->wait(); }

std::unique_ptr<Work> NcclCommunicator::send_async(torch::Tensor t, int peer, int /*tag*/) {
  check_tensor(t, "send");
  EXECUTOR_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send: peer " + std::to_string(peer) + " invalid");
  const ncclDataType_t type = nccl_type(t.scalar_type(), "send");
  const void* data = t.data_ptr();
  const auto n = static_cast<size_t>(t.numel());
  return launch("send", {t}, static_cast<double>(t.nbytes()), true,
                [&](cudaStream_t st) { return ncclSend(data, n, type, peer, comm_, st); });
}

std::unique_ptr<Work> NcclCommunicator::recv_async(torch::Tensor t, int peer, int /*tag*/) {
  check_tensor(t, "recv");
  EXECUTOR_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv: peer " + std::to_string(peer) + " invalid");
  const ncclDataType_t type = nccl_type(t.scalar_type(), "recv");
  void* data = t.data_ptr();
  const auto n = static_cast<size_t>(t.numel());
  auto work = launch("recv", {t}, 0, false, [&](cudaStream_t st) { return ncclRecv(data, n, type, peer, comm_, st); });
  count_call(0);
  return work;
}

std::unique_ptr<Work> NcclCommunicator::send_recv_async(torch::Tensor send, int to, torch::Tensor recv, int from,
                                                        int /*tag*/) {
  check_tensor(send, "send_recv");
  check_tensor(recv, "send_recv");
  EXECUTOR_CHECK(to >= 0 && to < size_ && to != rank_ && from >= 0 && from < size_ && from != rank_,
                 "send_recv: peer invalid");
  const ncclDataType_t st_type = nccl_type(send.scalar_type(), "send_recv");
  const ncclDataType_t rt_type = nccl_type(recv.scalar_type(), "send_recv");
  const void* src = send.data_ptr();
  void* dst = recv.data_ptr();
  const auto sn = static_cast<size_t>(send.numel()), rn = static_cast<size_t>(recv.numel());
  return launch("send_recv", {send, recv}, static_cast<double>(send.nbytes()), true, [&](cudaStream_t st) {
    if (const ncclResult_t start = ncclGroupStart(); start != ncclSuccess) return start;
    ncclResult_t rc = ncclSend(src, sn, st_type, to, comm_, st);
    if (rc == ncclSuccess) rc = ncclRecv(dst, rn, rt_type, from, comm_, st);
    const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
    return rc != ncclSuccess ? rc : end;
  });
}

void NcclCommunicator::all_to_all_v(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                                    const std::vector<int64_t>& recv_rows) {
  const int64_t row = check_all_to_all_v(out, in, send_rows, recv_rows);
  check_tensor(out, "all_to_all_v");
  check_tensor(in, "all_to_all_v");
  const ncclDataType_t type = nccl_type(in.scalar_type(), "all_to_all_v");
  const auto* src = static_cast<const char*>(in.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const auto row_elems = static_cast<size_t>(row);
  const size_t row_bytes = row_elems * in.element_size();
  // NCCL's all-to-all recipe (NCCL docs, "Point-to-point communication: all-to-all"): every
  // send and receive inside one group, which NCCL runs concurrently without deadlock.
  launch("all_to_all_v", {out, in}, static_cast<double>(in.nbytes()), true, [&](cudaStream_t st) {
    ncclResult_t first_error = ncclGroupStart();
    if (first_error != ncclSuccess) return first_error;
    size_t s_at = 0, r_at = 0;
    for (int p = 0; p < size_; ++p) {
      const auto sn = static_cast<size_t>(send_rows[static_cast<size_t>(p)]);
      const auto rn = static_cast<size_t>(recv_rows[static_cast<size_t>(p)]);
      ncclResult_t rc = ncclSuccess;
      if (sn > 0) rc = ncclSend(src + s_at * row_bytes, sn * row_elems, type, p, comm_, st);
      if (rc == ncclSuccess && rn > 0) rc = ncclRecv(dst + r_at * row_bytes, rn * row_elems, type, p, comm_, st);
      if (rc != ncclSuccess && first_error == ncclSuccess) first_error = rc;
      s_at += sn;
      r_at += rn;
    }
    const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
    return first_error != ncclSuccess ? first_error : end;
  })->wait();
}

void NcclCommunicator::barrier() {
  check_usable("barrier");
  // An all-reduce of one int32 on the device; waiting on it makes it a host barrier too.
  if (!barrier_.defined())
    barrier_ = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(torch::kCUDA, device_));
  void* data = barrier_.data_ptr();
  launch("barrier", {barrier_}, 0, false, [&](cudaStream_t st) {
    return ncclAllReduce(data, data, 1, ncclInt32, ncclSum, comm_, st);
  })->wait();
}

}  // namespace shardplan::executor
