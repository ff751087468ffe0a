#pragma once
// Sync batch norm's reductions over the communicator: the nn interface BatchStatsReducer made of a
// Communicator's all-reduce, which is timed (a rank that never arrives is reported, not waited
// for). On the CPU that is MpiComm on host memory; on a GPU the NCCL communicator on device memory
// (the statistics stay on the device).
#include <span>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"

namespace ddp::sync {

class CommBatchStatsReducer final : public nn::BatchStatsReducer {
 public:
  // `comm` must accept buffers in the model backend's memory (the gradient communicator does).
  explicit CommBatchStatsReducer(comm::Communicator& comm) : comm_(comm) {}
  void allreduce_sum(std::span<double> data) override { comm_.allreduce_sum(data); }

 private:
  comm::Communicator& comm_;
};

}  // namespace ddp::sync
