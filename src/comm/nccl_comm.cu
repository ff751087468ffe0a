// NcclComm: see include/ddp/comm/nccl_comm.hpp. Host code only (no kernels of ours); it lives in a
// .cu file so that it is built with the CUDA backend (ddp_cuda) and only there.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backoff.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/comm/stall_report.hpp"
#include "ddp/error.hpp"

namespace ddp::comm {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void cuda_fail(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();
  throw SystemError("NCCL communicator: " + what + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
}
void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) cuda_fail(e, what);
}

[[noreturn]] void stall_forever(int rank, std::int64_t seq) {
  std::fprintf(stderr,
               "ddp_train: fault injection (DDP_FAULT_STALL_RANK, test only): rank %d stalls "
               "before NCCL collective #%lld\n",
               rank, static_cast<long long>(seq));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// What rank 0 broadcasts: the NCCL id, or why it could not make one.
struct IdMessage {
  ncclUniqueId id;
  int status;
  char error[400];
};

}  // namespace

// The implementation of the NcclComm interface (make_nccl_comm below).
class NcclCommImpl final : public NcclComm {
 public:
  NcclCommImpl(MPI_Comm comm, int device, void* compute_stream, NcclCommOptions options);
  ~NcclCommImpl() override;
  NcclCommImpl(const NcclCommImpl&) = delete;
  NcclCommImpl& operator=(const NcclCommImpl&) = delete;

  int rank() const override;
  int size() const override;
  void allreduce_sum(std::span<float> data) override;
  void allreduce_sum(std::span<double> data) override;
  void allreduce_sum(std::span<std::int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void barrier() override;
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override;
  Request iallreduce_sum(std::span<float> data) override;
  void wait(Request& r) override;
  bool test(Request& r) override;

  void set_timeout(double seconds) override;
  double timeout() const override;
  void check_health() override;
  bool aborted() const override;
  std::int64_t collectives_started() const override;
  std::size_t pending_requests() const override;
  int device() const override;
  void* comm_stream() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct NcclCommImpl::Impl {
  struct Op {
    CollectiveInfo info;
    Clock::time_point start;
    cudaEvent_t done = nullptr;
  };

  MPI_Comm mpi = MPI_COMM_NULL;  // our duplicate (control plane: the id broadcast)
  int rank = 0, size = 1, device = 0;
  cudaStream_t compute = nullptr;  // not owned
  cudaStream_t stream = nullptr;   // the communication stream
  cudaEvent_t ready = nullptr;     // recorded on compute, waited by the communication stream
  ncclComm_t comm = nullptr;
  NcclCommOptions options;
  std::optional<StallFault> fault;
  bool aborted = false;
  std::int64_t seq = 0;
  std::uint64_t next_id = 1;
  std::unordered_map<std::uint64_t, Op> pending;
  std::vector<cudaEvent_t> free_events;
  void* dev_staging = nullptr;
  std::size_t dev_staging_bytes = 0;
  void* host_staging = nullptr;
  std::size_t host_staging_bytes = 0;

  // Device-side waits (training: abort_job_on_stall). wait() on a device buffer makes the compute
  // stream wait for the collective and returns: no host call waits for it any more, so a watchdog
  // thread polls these collectives against the stall timeout and for asynchronous NCCL errors (as
  // PyTorch's NCCL watchdog does). On either it reports and ends this process (std::_Exit: MPI is
  // initialised for the main thread only, and the launcher ends the job when a rank dies; the
  // other ranks' watchdogs see the same stall). It never touches the communicator otherwise, and
  // reads its error state only under watch_mutex, which abort_comm() takes too.
  struct Watched {
    Op op;
    double timeout_s = 0;
  };
  std::mutex watch_mutex;
  std::condition_variable watch_cv;
  std::vector<Watched> watched;      // guarded by watch_mutex
  std::vector<cudaEvent_t> retired;  // completed, for free_events; guarded
  bool stop_watchdog = false;        // guarded
  std::thread watchdog;

  ~Impl() { shutdown(); }

  void watch(const Op& op) {
    {
      std::lock_guard<std::mutex> lock(watch_mutex);
      watched.push_back(Watched{op, options.comm.timeout_s});
    }
    if (!watchdog.joinable()) watchdog = std::thread([this] { watch_loop(); });
  }

  void watch_loop() noexcept {
    (void)cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(watch_mutex);
    while (!stop_watchdog) {
      watch_cv.wait_for(lock, std::chrono::milliseconds(20));
      for (auto it = watched.begin(); it != watched.end();) {
        const cudaError_t q = cudaEventQuery(it->op.done);
        if (q == cudaSuccess) {
          retired.push_back(it->op.done);
          it = watched.erase(it);
          continue;
        }
        try {
          std::string error;
          ncclResult_t state = ncclSuccess;
          if (q != cudaErrorNotReady)
            error = std::string("waiting for collective #") + std::to_string(it->op.info.seq) +
                    " failed: " + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) + ")";
          else if (comm && ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
                   state != ncclSuccess && state != ncclInProgress)
            error = std::string("NCCL error in an asynchronous operation: ") +
                    ncclGetErrorString(state);
          else if (it->timeout_s > 0 &&
                   std::chrono::duration<double>(Clock::now() - it->op.start).count() >
                       it->timeout_s)
            error = describe_stall(it->op.info, it->timeout_s, {}, false,
                                   "NCCL cannot tell which ranks did not arrive; the ranks that "
                                   "are not stalled themselves report the same collective");
          if (!error.empty()) {
            std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s; ending this rank\n", rank,
                         size, error.c_str());
            std::fflush(stderr);
            std::_Exit(1);
          }
        } catch (...) {  // out of memory building the message: end all the same
          std::_Exit(1);
        }
        ++it;
      }
    }
  }

  void stop_watch() noexcept {
    if (!watchdog.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(watch_mutex);
      stop_watchdog = true;
    }
    watch_cv.notify_all();
    watchdog.join();
  }

  // On the main thread: completed device-side waits give their events back.
  void take_watchdog_news() {
    std::lock_guard<std::mutex> lock(watch_mutex);
    free_events.insert(free_events.end(), retired.begin(), retired.end());
    retired.clear();
  }

  // --- errors, stalls --------------------------------------------------------------------------

  void abort_comm() {
    std::lock_guard<std::mutex> lock(watch_mutex);  // the watchdog reads `comm`
    if (comm) (void)ncclCommAbort(comm);
    comm = nullptr;
    aborted = true;
  }

  [[noreturn]] void fail(const std::string& what, ncclResult_t r) {
    std::string msg = "NCCL error in " + what + " (rank " + std::to_string(rank) + " of " +
                      std::to_string(size) + "): " + ncclGetErrorString(r);
    const char* last = ncclGetLastError(comm);
    if (last && *last) msg += "; NCCL says: " + std::string(last);
    abort_comm();
    throw SystemError(msg + " (set NCCL_DEBUG=WARN for NCCL's own report)");
  }

  bool expired(Clock::time_point start) const {
    const double t = options.comm.timeout_s;
    return t > 0 && std::chrono::duration<double>(Clock::now() - start).count() > t;
  }

  [[noreturn]] void stall(const CollectiveInfo& info) {
    abort_comm();  // kernels waiting for the missing ranks exit; our streams drain
    const std::string message =
        describe_stall(info, options.comm.timeout_s, {}, false,
                       "NCCL cannot tell which ranks did not arrive; the ranks that are not "
                       "stalled themselves report the same collective");
    if (options.abort_job_on_stall) {
      std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s; aborting the job\n", rank, size,
                   message.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
    throw SystemError(message);
  }

  // A result of an NCCL call on a non-blocking communicator: ncclInProgress means the call goes on
  // in the background (e.g. connecting to peers); nothing may be enqueued after it before
  // ncclCommGetAsyncError says ncclSuccess.
  void settle(ncclResult_t r, const std::string& what, const CollectiveInfo& info,
              Clock::time_point start) {
    if (r == ncclSuccess) return;
    if (r != ncclInProgress || !comm) fail(what, r);
    detail::Backoff backoff;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
      if (q != ncclSuccess) fail(what, q);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(what, state);
      if (expired(start)) stall(info);
      backoff.pause();
    }
  }

  void check_health() {
    take_watchdog_news();
    if (aborted)
      throw SystemError("NCCL communicator (rank " + std::to_string(rank) +
                        ") was aborted after an earlier error or stall");
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) fail("ncclCommGetAsyncError", q);
    if (state != ncclSuccess && state != ncclInProgress)
      fail("an asynchronous NCCL operation", state);
  }

  // --- collectives -----------------------------------------------------------------------------

  CollectiveInfo begin(std::string kind, std::size_t bytes) {
    check_health();
    ++seq;
    if (fault && fault->rank == rank && fault->at == seq) stall_forever(rank, seq);
    return CollectiveInfo{seq, std::move(kind), bytes};
  }

  cudaEvent_t take_event() {
    if (!free_events.empty()) {
      cudaEvent_t e = free_events.back();
      free_events.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }

  // Device (or managed) memory of our GPU: used in place. Anything else is staged.
  bool managed(const void* p) const {
    cudaPointerAttributes a{};
    cuda_check(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes");
    return a.type == cudaMemoryTypeManaged;
  }
  bool on_device(const void* p) const {
    cudaPointerAttributes a{};
    cuda_check(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes");
    if (a.type == cudaMemoryTypeManaged) return true;
    if (a.type != cudaMemoryTypeDevice) return false;
    if (a.device != device)
      throw Error("NCCL communicator on CUDA device " + std::to_string(device) +
                  " was given a buffer of device " + std::to_string(a.device));
    return true;
  }

  void reserve_staging(std::size_t bytes) {
    if (dev_staging_bytes < bytes) {
      if (dev_staging) {
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        (void)cudaFree(dev_staging);
        dev_staging = nullptr;
        dev_staging_bytes = 0;
      }
      cuda_check(cudaMalloc(&dev_staging, bytes), "cudaMalloc of the staging buffer");
      dev_staging_bytes = bytes;
    }
    if (host_staging_bytes < bytes) {
      if (host_staging) (void)cudaFreeHost(host_staging);
      host_staging = nullptr;
      host_staging_bytes = 0;
      cuda_check(cudaMallocHost(&host_staging, bytes), "cudaMallocHost of the staging buffer");
      host_staging_bytes = bytes;
    }
  }

  // Polls until `done` has completed, with the health check and the stall timeout; then orders the
  // compute stream after it.
  void wait_event(cudaEvent_t done, const CollectiveInfo& info, Clock::time_point start) {
    detail::Backoff backoff;
    for (;;) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady)
        cuda_fail(q, "waiting for collective #" + std::to_string(info.seq));
      check_health();
      if (expired(start)) stall(info);
      backoff.pause();
    }
    cuda_check(cudaStreamWaitEvent(compute, done, 0), "cudaStreamWaitEvent");
  }

  // One blocking collective on `data` (bytes), `issue(buffer)` enqueues the NCCL call on `stream`.
  // `in_offset/in_bytes`: the part of the host buffer the collective reads (staged in); the whole
  // buffer is copied back. `device_order`: on device memory in training, "blocking" means "before
  // any compute work enqueued afterwards" (the compute stream waits, the watchdog keeps the
  // timeout) - what sync batch norm's statistics and the non-overlapped gradient all-reduce need;
  // the barrier, and everything with host buffers, waits on the host.
  template <class Issue>
  void blocking(void* data, std::size_t bytes, std::string kind, Issue issue, std::size_t in_offset,
                std::size_t in_bytes, bool device_order = false) {
    const CollectiveInfo info = begin(std::move(kind), bytes);
    const auto start = Clock::now();
    const bool device_buffer = on_device(data);
    // Managed memory may be read by the host right after the call: it waits then.
    const bool stream_wait =
        device_buffer && device_order && options.abort_job_on_stall && !managed(data);
    void* buffer = data;
    if (device_buffer) {
      cuda_check(cudaEventRecord(ready, compute), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
    } else {
      reserve_staging(bytes);
      buffer = dev_staging;
      auto* host = static_cast<char*>(host_staging);
      std::memcpy(host + in_offset, static_cast<const char*>(data) + in_offset, in_bytes);
      cuda_check(cudaMemcpyAsync(static_cast<char*>(dev_staging) + in_offset, host + in_offset,
                                 in_bytes, cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync to the staging buffer");
    }
    settle(issue(buffer), "collective #" + std::to_string(info.seq) + " (" + info.kind + ")", info,
           start);
    if (!device_buffer)
      cuda_check(cudaMemcpyAsync(host_staging, dev_staging, bytes, cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync from the staging buffer");
    cudaEvent_t done = take_event();
    const cudaError_t recorded = cudaEventRecord(done, stream);
    if (recorded != cudaSuccess) {
      free_events.push_back(done);
      cuda_fail(recorded, "cudaEventRecord");
    }
    if (stream_wait) {
      const cudaError_t e = cudaStreamWaitEvent(compute, done, 0);
      if (e != cudaSuccess) {
        free_events.push_back(done);
        cuda_fail(e, "cudaStreamWaitEvent for collective #" + std::to_string(info.seq));
      }
      watch(Op{info, start, done});
      return;
    }
    try {
      wait_event(done, info, start);
    } catch (...) {
      free_events.push_back(done);
      throw;
    }
    free_events.push_back(done);
    if (!device_buffer) std::memcpy(data, host_staging, bytes);
  }

  template <class T>
  void allreduce(std::span<T> data, ncclDataType_t type) {
    if (data.empty()) return;
    const std::size_t bytes = data.size_bytes();
    blocking(
        data.data(), bytes, "allreduce",
        [&](void* buf) {
          return ncclAllReduce(buf, buf, data.size(), type, ncclSum, comm, stream);
        },
        0, bytes, true);
  }

  // --- teardown --------------------------------------------------------------------------------

  void shutdown() noexcept {
    stop_watch();
    for (const Watched& w : watched) (void)cudaEventDestroy(w.op.done);
    watched.clear();
    for (cudaEvent_t e : retired) (void)cudaEventDestroy(e);
    retired.clear();
    if (comm) {
      bool clean = pending.empty();
      if (clean) {
        // Flush and release the communicator; bounded, then abort.
        ncclResult_t r = ncclCommFinalize(comm);
        const auto start = Clock::now();
        const double limit =
            options.comm.timeout_s > 0 ? std::min(options.comm.timeout_s, 60.0) : 60.0;
        while (r == ncclInProgress || r == ncclSuccess) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) {
            r = ncclSystemError;
            break;
          }
          if (state != ncclInProgress) {
            r = state;
            break;
          }
          if (std::chrono::duration<double>(Clock::now() - start).count() > limit) {
            r = ncclInProgress;
            break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        clean = r == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess;
        if (clean) comm = nullptr;
      }
      if (comm) (void)ncclCommAbort(comm);
      comm = nullptr;
    }
    for (auto& [id, op] : pending) (void)cudaEventDestroy(op.done);
    pending.clear();
    for (cudaEvent_t e : free_events) (void)cudaEventDestroy(e);
    free_events.clear();
    if (ready) (void)cudaEventDestroy(ready);
    ready = nullptr;
    if (dev_staging) (void)cudaFree(dev_staging);
    dev_staging = nullptr;
    if (host_staging) (void)cudaFreeHost(host_staging);
    host_staging = nullptr;
    if (stream) (void)cudaStreamDestroy(stream);
    stream = nullptr;
    (void)cudaGetLastError();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && mpi != MPI_COMM_NULL) MPI_Comm_free(&mpi);
    mpi = MPI_COMM_NULL;
  }
};

namespace {

// An MPI request waited with the stall timeout (the control-plane steps of the setup).
void wait_mpi(NcclCommImpl::Impl& m, MPI_Request& req, const CollectiveInfo& info) {
  const auto start = Clock::now();
  detail::Backoff backoff;
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      throw SystemError("NCCL setup: " + info.kind + " failed (MPI error " + std::to_string(rc) +
                        ")");
    if (done) return;
    if (m.expired(start)) m.stall(info);
    backoff.pause();
  }
}

// DDP_FAULT_NCCL_BOOTSTRAP_STALL: a receive that nothing matches stands for the bootstrap's
// exchange, waited under the timeout like the real one; the request is withdrawn before the stall
// is reported (thrown or the job aborted, as the options say).
void stall_bootstrap(NcclCommImpl::Impl& m) {
  std::fprintf(stderr,
               "ddp_train: fault injection (DDP_FAULT_NCCL_BOOTSTRAP_STALL, test only): rank %d's "
               "NCCL bootstrap never completes\n",
               m.rank);
  std::fflush(stderr);
  const CollectiveInfo info{0, "NCCL setup (broadcast of the unique id from rank 0)",
                            sizeof(IdMessage)};
  IdMessage msg{};
  MPI_Request req = MPI_REQUEST_NULL;
  constexpr int kNeverSentTag = 0x5d1;
  if (MPI_Irecv(&msg, static_cast<int>(sizeof msg), MPI_BYTE, 0, kNeverSentTag, m.mpi, &req) !=
      MPI_SUCCESS)
    throw SystemError("NCCL setup: MPI_Irecv (fault injection) failed");
  const auto start = Clock::now();
  detail::Backoff backoff;
  for (;;) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (m.expired(start)) {
      MPI_Cancel(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      m.stall(info);
    }
    backoff.pause();
  }
}

}  // namespace

NcclCommImpl::NcclCommImpl(MPI_Comm comm, int device, void* compute_stream, NcclCommOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = std::move(options);
  m.device = device;
  MPI_Comm_rank(comm, &m.rank);
  MPI_Comm_size(comm, &m.size);
  if (m.size > 1) m.fault = stall_fault_from_env();

  // A private duplicate for our control messages, itself under the timeout.
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Comm_idup(comm, &m.mpi, &req) != MPI_SUCCESS)
    throw SystemError("NCCL setup: MPI_Comm_idup failed");
  wait_mpi(m, req, CollectiveInfo{0, "NCCL setup (MPI_Comm_idup)", 0});
  if (m.options.fault_stall_bootstrap) stall_bootstrap(m);

  cuda_check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  m.compute = static_cast<cudaStream_t>(compute_stream);
  cuda_check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
  cuda_check(cudaEventCreateWithFlags(&m.ready, cudaEventDisableTiming),
             "cudaEventCreateWithFlags");

  // Rank 0 makes the id (or says why it cannot), everyone receives it over MPI.
  IdMessage msg{};
  if (m.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&msg.id);
    if (r != ncclSuccess) {
      msg.status = static_cast<int>(r);
      std::snprintf(msg.error, sizeof msg.error, "%s; %s", ncclGetErrorString(r),
                    ncclGetLastError(nullptr));
    }
  }
  if (MPI_Ibcast(&msg, static_cast<int>(sizeof msg), MPI_BYTE, 0, m.mpi, &req) != MPI_SUCCESS)
    throw SystemError("NCCL setup: MPI_Ibcast of the NCCL unique id failed");
  wait_mpi(m, req,
           CollectiveInfo{0, "NCCL setup (broadcast of the unique id from rank 0)", sizeof msg});
  if (msg.status != 0)
    throw SystemError(std::string("NCCL setup: rank 0 could not create the NCCL unique id "
                                  "(ncclGetUniqueId): ") +
                      msg.error + " (NCCL_SOCKET_IFNAME selects the network interface)");

  // Non-blocking: the setup (and every later call) can be waited with our timeout.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const auto start = Clock::now();
  const ncclResult_t r = ncclCommInitRankConfig(&m.comm, m.size, msg.id, m.rank, &config);
  m.settle(r, "ncclCommInitRankConfig", CollectiveInfo{0, "NCCL communicator setup", 0}, start);
  int count = 0, cu_device = -1;
  if (ncclCommCount(m.comm, &count) != ncclSuccess || count != m.size ||
      ncclCommCuDevice(m.comm, &cu_device) != ncclSuccess || cu_device != device)
    throw SystemError("NCCL setup: the communicator has " + std::to_string(count) +
                      " ranks on device " + std::to_string(cu_device) + ", expected " +
                      std::to_string(m.size) + " on device " + std::to_string(device));
}

NcclCommImpl::~NcclCommImpl() = default;

int NcclCommImpl::rank() const {
  return impl_->rank;
}
int NcclCommImpl::size() const {
  return impl_->size;
}

void NcclCommImpl::allreduce_sum(std::span<float> data) {
  impl_->allreduce(data, ncclFloat32);
}
void NcclCommImpl::allreduce_sum(std::span<double> data) {
  impl_->allreduce(data, ncclFloat64);
}
void NcclCommImpl::allreduce_sum(std::span<std::int64_t> data) {
  impl_->allreduce(data, ncclInt64);
}

void NcclCommImpl::broadcast(std::span<std::byte> data, int root) {
  Impl& m = *impl_;
  if (root < 0 || root >= m.size)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                std::to_string(m.size - 1) + ")");
  if (data.empty()) return;
  // Every rank stages its buffer in (the root's bytes are the ones that matter).
  m.blocking(
      data.data(), data.size(), "broadcast from rank " + std::to_string(root),
      [&](void* buf) {
        return ncclBroadcast(buf, buf, data.size(), ncclUint8, root, m.comm, m.stream);
      },
      0, data.size());
}

void NcclCommImpl::barrier() {
  Impl& m = *impl_;
  m.reserve_staging(sizeof(float));
  // A one-float all-reduce on the device: NCCL has no barrier. The staging buffer is device memory.
  m.blocking(
      m.dev_staging, sizeof(float), "barrier",
      [&](void* buf) { return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, m.comm, m.stream); },
      0, sizeof(float));
}

void NcclCommImpl::allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
  Impl& m = *impl_;
  const std::size_t n = mine.size();
  if (all.size() != n * static_cast<std::size_t>(m.size))
    throw Error("allgather: output holds " + std::to_string(all.size()) + " bytes, expected " +
                std::to_string(m.size) + " x " + std::to_string(n));
  if (n == 0) return;
  const std::size_t offset = n * static_cast<std::size_t>(m.rank);
  const bool mine_on_device = m.on_device(mine.data());
  const bool all_on_device = m.on_device(all.data());
  if (all_on_device) {
    // In place: our part at its offset first (ordered on the compute stream, which the
    // collective waits for).
    if (mine.data() != all.data() + offset)
      cuda_check(cudaMemcpyAsync(all.data() + offset, mine.data(), n,
                                 mine_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice,
                                 m.compute),
                 "cudaMemcpyAsync (allgather input)");
  } else {
    if (mine_on_device) {  // after the compute work that produced it
      cuda_check(
          cudaMemcpyAsync(all.data() + offset, mine.data(), n, cudaMemcpyDeviceToHost, m.compute),
          "cudaMemcpyAsync (allgather input)");
      cuda_check(cudaStreamSynchronize(m.compute), "cudaStreamSynchronize");
    } else if (mine.data() != all.data() + offset)
      std::memmove(all.data() + offset, mine.data(), n);
  }
  m.blocking(
      all.data(), all.size(), "allgather",
      [&](void* buf) {
        auto* b = static_cast<std::byte*>(buf);
        return ncclAllGather(b + offset, b, n, ncclUint8, m.comm, m.stream);
      },
      offset, n);
}

Request NcclCommImpl::iallreduce_sum(std::span<float> data) {
  Impl& m = *impl_;
  if (data.empty()) return Request{};
  if (!m.on_device(data.data())) {  // host memory: staged, so blocking
    m.allreduce(data, ncclFloat32);
    return Request{};
  }
  const CollectiveInfo info = m.begin("allreduce", data.size_bytes());
  const auto start = Clock::now();
  cuda_check(cudaEventRecord(m.ready, m.compute), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(m.stream, m.ready, 0), "cudaStreamWaitEvent");
  m.settle(
      ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, m.comm, m.stream),
      "collective #" + std::to_string(info.seq) + " (allreduce)", info, start);
  cudaEvent_t done = m.take_event();
  const cudaError_t e = cudaEventRecord(done, m.stream);
  if (e != cudaSuccess) {
    m.free_events.push_back(done);
    cuda_fail(e, "cudaEventRecord");
  }
  const std::uint64_t id = m.next_id++;
  m.pending.emplace(id, Impl::Op{info, start, done});
  return Request{id};
}

void NcclCommImpl::wait(Request& r) {
  if (r.empty()) return;
  Impl& m = *impl_;
  m.check_health();
  auto it = m.pending.find(r.id());
  if (it == m.pending.end()) throw Error("internal: wait on a request NcclComm did not issue");
  const Impl::Op op = it->second;
  m.pending.erase(it);
  r = Request{};
  m.take_watchdog_news();
  if (!m.options.abort_job_on_stall) {
    // Doctor and tests: a stall must come back as an exception, so the host waits here.
    try {
      m.wait_event(op.done, op.info, op.start);
    } catch (...) {
      m.free_events.push_back(op.done);
      throw;
    }
    m.free_events.push_back(op.done);
    return;
  }
  // The compute stream waits, the host goes on; the watchdog keeps the timeout.
  const cudaError_t e = cudaStreamWaitEvent(m.compute, op.done, 0);
  if (e != cudaSuccess) {
    m.free_events.push_back(op.done);
    cuda_fail(e, "cudaStreamWaitEvent for collective #" + std::to_string(op.info.seq));
  }
  m.watch(op);
}

bool NcclCommImpl::test(Request& r) {
  if (r.empty()) return true;
  Impl& m = *impl_;
  auto it = m.pending.find(r.id());
  if (it == m.pending.end()) throw Error("internal: test of a request NcclComm did not issue");
  const Impl::Op op = it->second;
  const cudaError_t q = cudaEventQuery(op.done);
  if (q == cudaErrorNotReady) {
    m.check_health();
    if (m.expired(op.start)) {
      m.pending.erase(it);
      r = Request{};
      m.free_events.push_back(op.done);  // destroyed with the communicator
      m.stall(op.info);
    }
    return false;
  }
  m.pending.erase(it);
  r = Request{};
  m.free_events.push_back(op.done);
  if (q != cudaSuccess) cuda_fail(q, "testing collective #" + std::to_string(op.info.seq));
  cuda_check(cudaStreamWaitEvent(m.compute, op.done, 0), "cudaStreamWaitEvent");
  return true;
}

void NcclCommImpl::set_timeout(double seconds) {
  impl_->options.comm.timeout_s = seconds;
}
double NcclCommImpl::timeout() const {
  return impl_->options.comm.timeout_s;
}
void NcclCommImpl::check_health() {
  impl_->check_health();
}
bool NcclCommImpl::aborted() const {
  return impl_->aborted;
}
std::int64_t NcclCommImpl::collectives_started() const {
  return impl_->seq;
}
std::size_t NcclCommImpl::pending_requests() const {
  return impl_->pending.size();
}
int NcclCommImpl::device() const {
  return impl_->device;
}
void* NcclCommImpl::comm_stream() const {
  return static_cast<void*>(impl_->stream);
}

std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm comm, int device, void* compute_stream,
                                         NcclCommOptions options) {
  return std::make_unique<NcclCommImpl>(comm, device, compute_stream, std::move(options));
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace ddp::comm
