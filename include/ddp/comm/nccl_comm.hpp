#pragma once
// Communicator over NCCL, the GPU data plane (MPI stays the control plane): rank 0 calls
// ncclGetUniqueId, the 128 bytes go to every rank by MPI broadcast, every rank joins with
// ncclCommInitRankConfig on its GPU. This is the bootstrap of nccl-tests, Horovod and llm.c.
//
// Buffers. Collectives work in place on device memory of the communicator's GPU (or managed
// memory). Host buffers are accepted too (loss sums, counts, a config broadcast): they are staged
// through pinned and device memory, which is correct but slower, and makes iallreduce_sum on a
// host buffer blocking.
//
// Streams. NCCL runs on a communication stream of its own. A collective starts after everything
// enqueued on the compute stream before the call (an event), so gradient buckets can be reduced
// while the rest of backward runs; wait()/test() completion makes the compute stream wait for the
// collective (an event) before anything enqueued afterwards, e.g. the optimizer step.
//
// The host does not wait for gradients. In training (abort_job_on_stall), wait() on a non-blocking
// all-reduce makes the compute stream wait for it and returns at once (completion in
// compute-stream order), so the host can enqueue the next steps while the GPU computes and
// communicates; a watchdog thread keeps the timeout and watches for asynchronous NCCL errors, and
// on either reports and ends the rank (std::_Exit; the launcher ends the job, the other ranks'
// watchdogs report the same collective). A blocking all-reduce of device memory (sync batch
// norm's statistics, the gradients with comm.overlap = false) is ordered the same way in training.
// The barrier, broadcasts and all-gathers, host buffers, and every wait with abort_job_on_stall =
// false (doctor, tests: the stall must come back as an exception) wait on the host.
//
// No silent hangs (ARCHITECTURE.md). The communicator is non-blocking (NCCL's blocking = 0), so no
// NCCL call can block the host indefinitely: every host wait polls the collective's completion
// event and ncclCommGetAsyncError, and the watchdog does the same for the collectives the compute
// stream waits for (a host synchronisation behind one would otherwise hang). An
// asynchronous NCCL error aborts the communicator (ncclCommAbort) and throws ddp::SystemError with
// ncclGetErrorString and ncclGetLastError. A collective that does not complete within the timeout
// (CommOptions, DDP_COMM_TIMEOUT_S) aborts the communicator, is reported as "collective #K (...)
// did not complete within T s" (NCCL cannot say which ranks did not arrive), and then either ends
// the job with MPI_Abort (default: the scheduler frees the nodes) or throws ddp::SystemError
// (abort_job_on_stall = false, for tests). DDP_FAULT_STALL_RANK/AT work as for MpiComm. The
// clock starts when the host enqueues the collective; in training the host runs at most ~3 steps
// ahead of the device (the batch feed's slots), so the timeout must exceed ~3 steps.
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "ddp/comm/comm_options.hpp"
#include "ddp/comm/communicator.hpp"

namespace ddp::comm {

// Test-only fault injection: DDP_FAULT_NCCL_BOOTSTRAP_STALL=1 makes the bootstrap's exchange
// never complete on every rank (as a firewall between the ranks would), right after the control
// communicator is duplicated and before any CUDA call, so that the stall handling of the setup
// (doctor's NCCL check) can be tested on a machine without GPUs.
inline bool nccl_bootstrap_stall_fault_from_env() {
  const char* v = std::getenv("DDP_FAULT_NCCL_BOOTSTRAP_STALL");
  return v && std::string_view(v) == "1";
}

struct NcclCommOptions {
  CommOptions comm = comm_options_from_env();
  // After a stall report: end the whole job (MPI_Abort on MPI_COMM_WORLD) or throw SystemError.
  bool abort_job_on_stall = true;
  bool fault_stall_bootstrap = nccl_bootstrap_stall_fault_from_env();
};

// The interface; make_nccl_comm() creates one. The implementation lives in the CUDA plugin
// (libddp_cuda.so, see ddp/plugin/cuda_plugin.hpp).
class NcclComm : public Communicator {
 public:
  // The stall timeout in seconds (<= 0: wait forever) for collectives waited from now on.
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;
  // For a watchdog between collectives: polls ncclCommGetAsyncError; on an error aborts the
  // communicator and throws ddp::SystemError. Cheap; never blocks.
  virtual void check_health() = 0;
  // True once the communicator was aborted (after an error or a stall); every call then throws.
  virtual bool aborted() const = 0;
  // Collectives started so far, and non-blocking ones not yet completed.
  virtual std::int64_t collectives_started() const = 0;
  virtual std::size_t pending_requests() const = 0;
  // The CUDA device and the communication stream (a cudaStream_t, as void*).
  virtual int device() const = 0;
  virtual void* comm_stream() const = 0;
};

// A communicator collective over `comm`. `device`: the CUDA device (index among the visible ones)
// this rank uses; it is made current. `compute_stream`: the cudaStream_t the gradients are produced
// on (CudaBackend::compute_stream()), as void*; nullptr means the legacy default stream.
// Throws ddp::SystemError when NCCL cannot be set up (the message says which step failed), and
// when the CUDA plugin is not loaded (backend::cuda_unavailable_reason() says why).
std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm comm, int device, void* compute_stream,
                                         NcclCommOptions options = {});

// "NCCL 2.28.9" (the library loaded at run time), or "" when the CUDA plugin is not loaded.
std::string nccl_version();

}  // namespace ddp::comm
