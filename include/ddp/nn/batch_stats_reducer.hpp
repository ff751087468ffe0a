#pragma once
// Sync batch norm's view of the ranks: a sum over every rank of a few per-channel statistics. nn
// sees only this interface; sync/ implements it over the communicator (nn stays below comm).
#include <span>

namespace ddp::nn {

class BatchStatsReducer {
 public:
  virtual ~BatchStatsReducer() = default;
  // In-place element-wise sum over all ranks of `data`, which lives in the backend's memory
  // (device memory on a GPU). Collective: every rank makes the same calls in the same order.
  virtual void allreduce_sum(std::span<double> data) = 0;
};

// A layer whose training step makes collective calls through a reducer (sync batch norm). The
// model hands it the reducer, and a rank without samples in a step still makes the calls, in the
// same order as the others (Model::step_without_samples).
class UsesBatchStatsReducer {
 public:
  // nullptr: statistics of this rank's samples only (plain batch norm).
  virtual void set_batch_stats_reducer(BatchStatsReducer* reducer) = 0;
  // The collectives of a training forward / backward over zero samples (running statistics are
  // updated like the other ranks'; the parameter gradients become zero).
  virtual void forward_without_samples() = 0;
  virtual void backward_without_samples() = 0;

 protected:
  ~UsesBatchStatsReducer() = default;
};

}  // namespace ddp::nn
