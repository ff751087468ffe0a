#pragma once
// How fast each rank computes. The trainer times every step's forward + backward and the time it
// waited for the gradient all-reduce; at the end of an epoch one allgather gives every rank the
// same table of every rank's figures, which metrics.jsonl's `ranks` array, the straggler report and
// rank_shares = auto read (rank_balance.hpp).
//
// What the host clock measures. On the CPU a step's steady_clock time minus its exposed all-reduce
// wait is the rank's own compute. On a GPU the kernels are asynchronous and the backend has no
// event timer, so the trainer waits for its compute stream (Backend::synchronize) just before it
// waits for the gradient all-reduce: that host wait happens anyway (the collective's completion is
// polled on the host, and the last bucket cannot finish before backward does), so the split costs
// nothing but a launch latency, and the step's host time minus the wait is the device's forward +
// backward plus whatever was still queued from the step before (the optimizer update, which is the
// same on every rank). On one rank there is no such wait and none is added: the figure is the
// host's view, which over an epoch still follows the device, because the queue is bounded and
// drained at the epoch's end. With model.sync_batchnorm the compute includes the batch statistics'
// reductions, which wait for the slowest rank, so the ranks' figures come out closer together than
// they are.
// Where ranks (or other programs) share a CPU, the figure shows the sharing as far as the scheduler
// interleaves them within a step's compute: steps much longer than its time slice (milliseconds)
// do; a rank that gets the CPU for a whole short step in turn looks as fast as one with a core of
// its own. On a CPU time-shared with other work, Open MPI's MPI_Test (between backward's layers)
// yields the CPU when the node is oversubscribed, and that time counts as compute.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/runtime/rank_info.hpp"

namespace ddp::train {

// One rank's figures over the steps of one epoch that this job segment trained.
struct RankSpeed {
  int rank = 0;
  std::string host;  // from the start-up rank table; "" when unknown
  int threads = 0;   // compute threads; 0 when unknown
  std::string cpus;  // CPUs the rank may run on ("0-3"); "" when unknown
  // Samples of a full global batch that this rank trains (its share; equal split or rank_shares).
  std::int64_t share = 0;
  std::int64_t steps = 0;
  std::int64_t samples = 0;  // samples this rank trained
  double compute_s = 0.0;    // forward + backward over all steps
  double wait_s = 0.0;       // exposed gradient all-reduce wait over all steps
  double train_s = 0.0;      // this rank's wall-clock training time of the epoch
  // The steps the speed is taken from: all but the run's first step when there are others (it
  // creates primitives, touches memory for the first time, fills caches).
  std::int64_t timed_samples = 0;
  double timed_compute_s = 0.0;

  // Seconds of compute per sample (timed steps); 0 when nothing was timed.
  double compute_per_sample_s() const;
  // Samples per second this rank contributed to the epoch (samples / train_s): summed over the
  // ranks it is the epoch's images/s. How fast the rank could go is compute_per_sample_s.
  double images_per_s() const;
};

// Sums one rank's step times over an epoch. Every step is counted; the first step the meter ever
// sees (the run's, or a resumed segment's, warm-up) is left out of the speed unless it is the only
// step of its epoch.
class StepMeter {
 public:
  // compute_s: forward + backward of the step; wait_s: time the step waited for the gradient
  // all-reduce; samples: this rank's samples in the step.
  void add_step(double compute_s, double wait_s, std::int64_t samples);
  // The figures of the steps since the previous call (rank, host, share: the caller's to fill),
  // with `train_s` the epoch's wall-clock time on this rank; starts the next epoch.
  RankSpeed take_epoch(double train_s);

 private:
  RankSpeed epoch_;
  bool warmed_up_ = false;
  double warmup_compute_s_ = 0.0;  // the warm-up step, if it fell into this epoch
  std::int64_t warmup_samples_ = 0;
};

// Every rank's figures, on every rank, index = rank (collective over `comm`). The numbers travel
// as exact bytes, so every rank holds bit-identical tables and takes the same decisions from them.
// Host, threads and CPUs come from `startup` (the rank table gathered at start, main.cpp) instead
// of travelling again; an empty `startup` leaves them unknown.
std::vector<RankSpeed> gather_rank_speeds(const RankSpeed& mine,
                                          const std::vector<runtime::RankInfo>& startup,
                                          comm::Communicator& comm);

}  // namespace ddp::train
