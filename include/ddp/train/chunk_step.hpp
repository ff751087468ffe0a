#pragma once
// Reproducible mode's forward and backward (train.reproducible, chunk_plan.hpp): this rank's chunks
// of a global batch, each computed alone - on a replica of the model of its own, by one thread
// running single-threaded kernels, as many chunks at a time as the rank has compute threads - so
// that a chunk's gradient is the same bits whichever rank or thread computes it. Then exact sums
// over every chunk of every rank (sync/exact_gradient_sum.hpp, sync/exact_allreduce.hpp):
//   - the gradient, overlapped with backward in buckets (without sync batch norm);
//   - the running statistics: each chunk updates them from the step's starting values by its own
//     batch statistics ("ghost" batch norm), and the step's result is their mean over the chunks,
//     weighted by the chunks' samples (a momentum update by the chunks' mean statistics);
//   - the loss and the correct count.
// With sync batch norm the chunks meet at every batch norm: its statistics are the exact sums over
// all chunks of the global batch (a rank without chunks in a step still takes part).
//
// The main thread coordinates: it starts the chunks, makes every collective (MPI is initialised
// FUNNELED) and waits; the chunk threads compute.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <thread>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/data/loader.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"
#include "ddp/nn/layer_spec.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/sync/exact_gradient_sum.hpp"
#include "ddp/train/micro_batches.hpp"

namespace ddp::train {

struct ChunkStepOptions {
  const std::vector<nn::LayerSpec>* layers = nullptr;  // the model's (replicas are built from it)
  double label_smoothing = 0.0;
  sync::SyncOptions buckets;  // comm.bucket_mb, comm.first_bucket_mb, comm.overlap
  bool sync_batchnorm = false;
  int threads = 1;  // chunks computed at once (runtime.threads)
};

class ChunkStep {
 public:
  // `model`: the trainer's (CPU backend), whose parameters the chunks read and whose gradients
  // and buffers receive the sums. `comm`: the ranks (host buffers).
  ChunkStep(nn::Model& model, comm::Communicator& comm, const ChunkStepOptions& options);
  ~ChunkStep();
  ChunkStep(const ChunkStep&) = delete;
  ChunkStep& operator=(const ChunkStep&) = delete;

  struct Result {
    nn::LossSums loss;  // over the whole global batch, the same on every rank
    // A gradient tensor some chunk held a NaN or an inf in (its sum is NaN).
    std::optional<sync::NonFinite> nonfinite;
  };
  // The rank's chunks of `batch` (plan.chunks), the loss gradient scaled by `grad_scale`, dropout
  // masks from `dropout_seed`; inject_inf: the first chunk's loss gradient gets an inf (the
  // test-only DDP_FAULT_INF_GRAD). Then model.grads() = the exact gradient of the global batch and
  // model.buffers() = the chunks' running statistics combined.
  Result run(const data::Batch& batch, const MicroBatchPlan& plan, double grad_scale,
             std::uint64_t dropout_seed, bool inject_inf);

  // Seconds spent waiting for the gradient collectives.
  double wait_s() const { return sum_.wait_s(); }

 private:
  struct Replica;
  class Rendezvous;

  void ensure_replicas(std::int64_t n);
  void worker(Replica& r);
  void compute(Replica& r);
  // Sync batch norm: the exact sum of the chunks' deposited statistics (main thread).
  void meet();
  // The lowest layer whose backward every running chunk has finished, it and all above it (none
  // yet: SIZE_MAX).
  std::size_t layers_done() const;
  void combine_buffers_and_loss(std::int64_t chunks, std::int64_t global_size, Result& out);

  nn::Model& model_;
  comm::Communicator& comm_;
  ChunkStepOptions options_;
  sync::ExactGradientSum sum_;
  std::counting_semaphore<> tokens_;  // compute threads free
  std::vector<std::unique_ptr<Replica>> replicas_;
  // A rank without chunks joins sync batch norm's collectives through the trainer's model.
  std::unique_ptr<nn::BatchStatsReducer> idle_reducer_;

  // The step, guarded by mu_: the chunk threads wait on work_cv_, the main thread on main_cv_.
  std::mutex mu_;
  std::condition_variable work_cv_, main_cv_;
  bool stop_ = false, failed_ = false;
  std::int64_t active_ = 0, done_ = 0, arrived_ = 0;
  std::uint64_t meeting_ = 0;  // sync batch norm meetings completed
  std::int64_t terms_ = 1;     // chunks in the global batch
  std::int64_t chunk_ = 0;     // train.chunk
};

}  // namespace ddp::train
