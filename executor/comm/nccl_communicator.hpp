#pragma once
// NcclCommunicator: the Communicator interface over NCCL, for CUDA tensors.
//
//   bootstrap  rank 0 of the MPI communicator makes an ncclUniqueId and broadcasts it over MPI;
//              every rank then calls ncclCommInitRankConfig with a non-blocking config and
//              polls ncclCommGetAsyncError until the communicator is ready (or the timeout).
//   device     the CUDA device current when the communicator is built (cudaGetDevice): the
//              trainer selects it per local rank before building the process groups. Every
//              tensor must live on that device.
//   stream     by default work is enqueued on the legacy default stream (cudaStreamLegacy),
//              which orders it with LibTorch's default-stream kernels without c10/cuda headers
//              (the CPU LibTorch has none); collectives therefore do not overlap compute.
//              NcclStream::side gives the communicator a non-blocking stream of its own: each
//              op first waits (cudaStreamWaitEvent) for the work queued on the legacy stream so
//              far, so its tensors are ready, and does not block later compute. Pipeline links
//              use it: their sends and receives then never queue behind another group's ops.
//   completion an event is recorded after each op; Work::wait() polls cudaEventQuery and
//              ncclCommGetAsyncError. Past the timeout the communicator is aborted
//              (ncclCommAbort, which also stops its kernels) and CommError is thrown; every later
//              call on this group throws CommError too.
//   stats      seconds = time inside enqueue + waits (a wait also covers compute queued before
//              the op on the same stream); bytes and calls as in the MPI backend.
//   dtypes     float32/16, bfloat16, float64, int64, int32, uint8, int8 (bool: data movement
//              and max only). Sums run in the native dtype.
#include <mpi.h>

#include <vector>

#include "communicator.hpp"

// Opaque handles of nccl.h / CUDA's driver_types.h, so that this header needs neither.
struct ncclComm;     // ncclComm_t  = ncclComm*
struct CUevent_st;   // cudaEvent_t = CUevent_st*
struct CUstream_st;  // cudaStream_t = CUstream_st*

namespace shardplan::executor {

class NcclWork;

enum class NcclStream { legacy, side };

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (every rank of it must construct one, in the same order). Takes
  // ownership of `comm` (freed on destruction) unless it is MPI_COMM_WORLD.
  NcclCommunicator(MPI_Comm comm, std::string name, double timeout_s, NcclStream stream = NcclStream::legacy);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] const char* backend() const override { return "nccl"; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] torch::Device device() const override { return {torch::kCUDA, static_cast<c10::DeviceIndex>(device_)}; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void barrier() override;
  // Grouped ncclSend/ncclRecv pairs (one per peer with a non-zero count), one completion event:
  // waited like the other collectives (timeout -> abort + CommError).
  void all_to_all_v(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send_rows,
                    const std::vector<int64_t>& recv_rows) override;

  std::unique_ptr<Work> all_reduce_async(torch::Tensor t) override;
  std::unique_ptr<Work> reduce_scatter_async(torch::Tensor out, torch::Tensor in) override;
  std::unique_ptr<Work> all_gather_async(torch::Tensor out, torch::Tensor in) override;
  // NCCL has no tags: messages to one peer match in issue order, so callers must issue them
  // in the same order on both sides (the tag is ignored).
  std::unique_ptr<Work> send_async(torch::Tensor t, int peer, int tag) override;
  std::unique_ptr<Work> recv_async(torch::Tensor t, int peer, int tag) override;
  // ncclSend and ncclRecv in one group: two ranks exchanging with each other do not deadlock.
  std::unique_ptr<Work> send_recv_async(torch::Tensor send, int to, torch::Tensor recv, int from, int tag) override;

 private:
  friend class NcclWork;

  // Runs `enqueue(stream)` (an NCCL call on that stream returning ncclResult_t) on this
  // communicator's device, waits out ncclInProgress, records the completion event.
  // `keep`: tensors held until the op completes.
  template <class Enqueue>
  std::unique_ptr<NcclWork> launch(const char* what, std::vector<torch::Tensor> keep, double bytes, bool count,
                                   Enqueue&& enqueue);
  std::unique_ptr<NcclWork> start_all_reduce(torch::Tensor t, ReduceOp op);
  std::unique_ptr<NcclWork> alone(const char* what, double bytes);  // the op on a group of one
  // Blocks until the event `done` has fired (and NCCL reports no error) or throws CommError.
  void wait_event(CUevent_st* done, const char* what);
  // Polls ncclCommGetAsyncError until it leaves ncclInProgress; throws on error or timeout.
  void settle(const char* what, double timeout_s);
  // Aborts the NCCL communicator (once) and throws CommError with NCCL's error text.
  [[noreturn]] void fail(const char* what, int nccl_result);
  [[noreturn]] void timed_out(const char* what, double waited);
  void check_cuda(int cuda_error, const char* what);
  void check_usable(const char* what) const;
  void check_tensor(const torch::Tensor& t, const char* what) const;
  void abort_comm();
  void release_stream();
  // The stream ops are enqueued on; for a side stream, first makes it wait for the legacy one.
  CUstream_st* ready_stream();

  MPI_Comm mpi_comm_;
  std::string name_;
  double timeout_s_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ncclComm* comm_ = nullptr;
  CUstream_st* side_ = nullptr;        // own non-blocking stream (NcclStream::side), else null
  CUevent_st* legacy_done_ = nullptr;  // recorded on the legacy stream before each side-stream op
  bool broken_ = false;                // aborted after an error or timeout
  torch::Tensor barrier_;              // one int32 on device_, allocated on first barrier()
};

}  // namespace shardplan::executor
