#pragma once
// The training loop: epochs of synchronous data-parallel steps, exact evaluation, metrics.
#include <chrono>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <memory>

#include "ddp/backend/backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/lr_schedule.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/sync/batch_stats_sync.hpp"
#include "ddp/sync/gradient_sync.hpp"
#include "ddp/train/batch_feed.hpp"
#include "ddp/train/confusion.hpp"
#include "ddp/train/device_step_timer.hpp"
#include "ddp/train/loss_scaler.hpp"
#include "ddp/train/metrics.hpp"
#include "ddp/train/micro_batches.hpp"
#include "ddp/train/options.hpp"
#include "ddp/train/rank_speed.hpp"
#include "ddp/train/run_start.hpp"

namespace ddp::train {

class TensorBoardWriter;
class Trace;
class ProgressLog;

struct EvalResult {
  double loss = 0.0;         // mean over all test samples
  double accuracy = 0.0;     // fraction
  std::int64_t samples = 0;  // counted exactly once each over all ranks
  Confusion confusion;       // all-reduced: every rank holds every test sample's count
};

struct TrainResult {
  EpochMetrics last;
  double total_s = 0.0;  // training and evaluation time of the run, over all its segments
  bool stopped = false;  // a stop signal ended training early (a snapshot was written)
};

// Where the trainer computes (app::setup_compute chooses it).
struct ComputePlace {
  std::unique_ptr<backend::Backend> backend;  // null: the CPU backend
  // Carries the gradient all-reduce (NCCL on GPUs); null: the trainer's communicator does.
  comm::Communicator* grad_comm = nullptr;
  // The start-up rank table (main.cpp): host, threads and CPUs of every rank for the per-rank
  // figures; empty: unknown.
  std::vector<runtime::RankInfo> ranks;
};

class Trainer {
 public:
  // Loads data, builds the model (same initial weights on every rank), optimizer and schedule.
  // `out` receives the human log (pass a null stream on ranks other than 0). `comm` is the control
  // plane (MPI): broadcasts, metrics, the stop agreement, evaluation counts.
  Trainer(const Setup& cfg, comm::Communicator& comm, std::ostream& out, ComputePlace place = {});
  ~Trainer();

  // Trains the run `start` describes (plan_run_start; the trainer must have been built with
  // start.config), recording it in run.dir (run.json, config.toml, metrics.jsonl, snapshots).
  TrainResult run(const RunStart& start);
  // Plans the start itself (plan_run_start with the trainer's configuration), then run(start).
  TrainResult run();
  // Exact evaluation on the test set. logits: when given, receives every test sample's logits
  // ([test samples, classes], dataset order) on every rank.
  EvalResult evaluate(std::vector<float>* logits = nullptr);
  // One name per class (data/class_names.hpp).
  const std::vector<std::string>& class_names() const { return class_names_; }
  // Loads the snapshot cfg.train.resume names ("auto" or a path; "" does nothing): rank 0 reads it,
  // every rank receives the state. run() calls it; `ddp_train eval` calls it alone.
  void resume();

  // Each rank's share of every global batch: its slice of the configured global batch (rank 0
  // first; they sum to it). A short last batch of an epoch is cut in the same proportions.
  const std::vector<std::int64_t>& rank_shares() const { return shares_; }
  // New shares from the next epoch on (train.rank_shares = auto): one positive weight per rank,
  // turned into slices of the configured global batch as the sampler cuts batches (largest
  // remainders). Every rank must call it with the same weights at the same point (decide from
  // all-reduced figures). Throws Error for a wrong count, a weight <= 0, or weights that leave a
  // rank fewer samples than train.accumulate. Snapshots written after the call keep the new shares.
  void set_rank_shares(const std::vector<std::int64_t>& weights);

  nn::Model& model() { return *model_; }
  const data::SampleSet& train_set() const { return train_data_->samples(); }
  const data::SampleSet& test_set() const { return test_data_->samples(); }

 private:
  // Trains epoch `epoch` from step `first_step`. When all ranks agreed to stop: `stopped` if the
  // epoch is left unfinished (last_step_ tells where), `stop_after` if the request came with its
  // last step (the epoch completes first). Throws when the loss stops being finite.
  EpochMetrics train_epoch(std::int64_t epoch, std::int64_t first_step, bool& stopped,
                           bool& stop_after);
  // The body of run(start) (run() records how it ended).
  TrainResult train_run(RunRecord* record);
  // Rank 0: run.json with the current segment (no-op elsewhere).
  void write_record(RunRecord* record);
  // Rank 0 writes a snapshot of the current state at `position` and prunes old ones; refuses
  // weights that are not finite.
  void save(std::int64_t epoch, std::int64_t step_in_epoch);
  data::SamplerOptions sampler_options() const;
  // Forward + backward of this rank's slice of a global batch in its micro-batches (step_plan),
  // then the gradient all-reduce. The summed loss and correct count accumulate in the backend
  // (take_loss).
  void train_step(const data::Batch& batch);
  // This rank's micro-batches for a global batch of `global_size` samples.
  MicroBatchPlan step_plan(std::int64_t global_size) const;
  // train.rank_shares as slices of the global batch; ConfigError for a list that does not fit the
  // world or leaves a rank without a sample.
  std::vector<std::int64_t> configured_shares() const;
  // rank_batch_, micro_batch_ and max_micro_batches_ for the current shares and caps.
  void size_batches();
  // Activations, loss gradient, sample ids and batch slots for them (grown, never shrunk).
  void reserve_batches();
  // Shares given by set_rank_shares take effect (at an epoch's start).
  void apply_pending_shares();
  // Time spent so far waiting for gradient all-reduces (overlapped and blocking): the host's wait
  // on the CPU, the device's on a GPU (of the steps collected so far).
  double grad_wait_s() const;
  // On a GPU: the device-timed steps the device has passed (all, waiting, with wait_for_all) into
  // the rank-speed meter and the wait total.
  void collect_step_times(bool wait_for_all);
  // On a GPU with loss scaling: the overflow flags of the steps enqueued so far but the newest
  // `keep`, read back into the loss scaler (and the optimizer's step count).
  void settle_overflow(std::size_t keep);

  Setup cfg_;
  comm::Communicator& comm_;
  std::ostream& out_;
  std::unique_ptr<backend::Backend> be_;
  comm::Communicator* grad_comm_;                          // comm_ or the NCCL communicator
  std::unique_ptr<data::Dataset> train_data_, test_data_;  // what the loaders read
  std::vector<std::int64_t> train_chunks_;  // data.shuffle_window > 0: each sample's chunk
  std::string data_note_;  // start-up lines on the data: limit subsets, data.cache = node
  data::Normalization norm_;
  std::vector<std::string> class_names_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LrSchedule> sched_;
  std::unique_ptr<sync::GradientSync> sync_;  // accumulation and all-reduce (one rank too)
  // model.sync_batchnorm on more than one rank: batch statistics summed over the ranks.
  std::unique_ptr<sync::CommBatchStatsReducer> bn_reducer_;
  std::unique_ptr<BatchFeed> feed_;  // batches into the backend's memory
  // On a GPU: each step's compute and gradient wait, timed on the device; their wait total.
  std::unique_ptr<DeviceStepTimer> step_timer_;
  double device_wait_s_ = 0.0;
  LossScaler scaler_;  // dynamic loss scaling (fp16), or disabled
  // GPU: the overflow-flag slots not yet read, oldest first, with the scale of their step.
  std::deque<std::pair<int, double>> overflow_pending_;
  // Test-only fault injection (DDP_FAULT_INF_GRAD=RANK:STEP): that rank's loss gradient gets an
  // inf at that global step, an overflow the loss scaler must catch on every rank.
  int fault_inf_rank_ = -1;
  std::int64_t fault_inf_step_ = -1;
  std::int64_t global_batch_ = 0;             // samples per optimizer step over all ranks
  std::vector<std::int64_t> shares_;          // every rank's slice of the global batch
  std::vector<std::int64_t> pending_shares_;  // set_rank_shares' for the next epoch (or empty)
  std::vector<std::int64_t> caps_;            // every rank's micro-batch cap (0: none)
  bool same_micro_count_ = false;             // sync batch norm on several ranks: all run as many
  std::int64_t rank_batch_ = 0;               // the largest slice this rank trains
  std::int64_t micro_batch_ = 0;              // the largest micro-batch this rank runs
  std::int64_t max_micro_batches_ = 1;        // the most micro-batches of one step on this rank
  std::int64_t feed_batch_ = 0;               // the batch slots' size
  std::vector<std::int64_t> sample_ids_;
  std::int64_t steps_per_epoch_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t samples_seen_ = 0;
  StepMeter step_meter_;                       // this rank's step times (rank_speed.hpp)
  std::vector<runtime::RankInfo> rank_table_;  // ComputePlace::ranks
  // The stop flag being summed over the ranks during the next step (see train_epoch). A member:
  // the buffer of a non-blocking all-reduce must outlive it.
  // [0]: a stop was asked for; [1]: the loss stopped being finite (so that every rank stops at the
  // same step, and rank 0 can record why).
  float stop_flags_[2] = {0.0f, 0.0f};
  comm::Request stop_request_;
  std::int64_t start_epoch_ = 0, start_step_ = 0;  // where a resumed run continues
  std::string history_;                            // metrics.jsonl lines so far
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss_, eval_loss_;
  Tensor dlogits_;
  std::string run_id_;        // the run this trainer continues (snapshots carry it)
  std::int64_t segment_ = 1;  // this job segment's number in the run (metrics rows carry it)
  double run_train_s_ = 0.0;  // the run's training time before this segment (from the snapshot)
  std::chrono::steady_clock::time_point segment_t0_;
  ckpt::EpochProgress epoch_carry_;  // the resumed epoch's totals before this segment
  ckpt::EpochProgress progress_;     // the current epoch's totals (saved by a mid-epoch stop)
  std::int64_t last_step_ = 0;       // steps of the current epoch done
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0 with run.tensorboard
  std::unique_ptr<Trace> trace_;                    // every rank with run.trace
  std::unique_ptr<ProgressLog> progress_log_;       // rank 0: progress lines, step scalars
};

}  // namespace ddp::train
