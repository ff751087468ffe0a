#pragma once
// The training loop: epochs of synchronous data-parallel steps, exact evaluation, metrics. The
// trainer wires the rooms together and runs the epochs; each idea lives in its own file: the
// batch plan (batch_plan.hpp), the step (train_step.hpp), the stop agreement
// (comm/stop_agreement.hpp), evaluation (evaluator.hpp), snapshots (checkpointer.hpp), run.json
// (run_recorder.hpp) and the start-up lines (run_banner.hpp).
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/comm/stop_agreement.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/lr_schedule.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/sync/batch_stats_sync.hpp"
#include "ddp/sync/gradient_sync.hpp"
#include "ddp/train/batch_feed.hpp"
#include "ddp/train/batch_plan.hpp"
#include "ddp/train/checkpointer.hpp"
#include "ddp/train/evaluator.hpp"
#include "ddp/train/metrics.hpp"
#include "ddp/train/options.hpp"
#include "ddp/train/run_start.hpp"
#include "ddp/train/train_step.hpp"
#include "ddp/train/training_data.hpp"
#include "ddp/train/weight_average.hpp"

namespace ddp::train {

class Trace;
class RunRecorder;
class RunWatch;

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
  // Exact evaluation on the test set (evaluator.hpp). logits: when given, receives every test
  // sample's logits ([test samples, classes], dataset order) on every rank.
  EvalResult evaluate(std::vector<float>* logits = nullptr);
  // One name per class (data/class_names.hpp).
  const std::vector<std::string>& class_names() const { return data_.class_names; }
  // Loads the snapshot cfg.train.resume names ("auto" or a path; "" does nothing): rank 0 reads it,
  // every rank receives the state. run() calls it.
  void resume();

  // Each rank's share of every global batch: its slice of the configured global batch (rank 0
  // first; they sum to it). A short last batch of an epoch is cut in the same proportions.
  const std::vector<std::int64_t>& rank_shares() const { return plan_.shares(); }
  // New shares from the next epoch on (train.rank_shares = auto): one positive weight per rank,
  // turned into slices of the configured global batch as the sampler cuts batches (largest
  // remainders). Every rank must call it with the same weights at the same point (decide from
  // all-reduced figures). Throws Error for a wrong count, a weight <= 0, or weights that leave a
  // rank fewer samples than train.accumulate. Snapshots written after the call keep the new shares.
  void set_rank_shares(const std::vector<std::int64_t>& weights);

  nn::Model& model() { return *model_; }
  const data::SampleSet& train_set() const { return data_.train->samples(); }
  const data::SampleSet& test_set() const { return data_.test->samples(); }

 private:
  // How an epoch ended early: `stopped` if it is left unfinished (last_step_ tells where),
  // `stop_after` if the request came with its last step (the epoch completes first).
  struct EpochEnd {
    bool stopped = false, stop_after = false;
  };
  // Trains epoch `epoch` from step `first_step` until its end or the ranks agree to stop. Throws
  // when the loss stops being finite.
  EpochMetrics train_epoch(std::int64_t epoch, std::int64_t first_step, EpochEnd& end);
  // The epoch loop of run(start).
  TrainResult train_run(RunRecorder& record);
  // What follows a complete epoch: evaluation when due, the epoch line, rank_shares = auto.
  void after_epoch(std::int64_t epoch, EpochMetrics& m);
  // The start-up lines (rank 0 prints) and run.dir/model.txt.
  void print_banner(std::int64_t segment);
  // A snapshot at `epoch` and `step_in_epoch` (checkpointer.hpp), with the loss scale settled.
  void save(std::int64_t epoch, std::int64_t step_in_epoch);
  data::SamplerOptions sampler_options() const;
  // Activations and batch slots for the plan's sizes (grown, never shrunk).
  void reserve_batches();
  // Shares given by set_rank_shares take effect (at an epoch's start).
  void apply_pending_shares();

  Setup cfg_;
  comm::Communicator& comm_;
  std::ostream& out_;
  std::unique_ptr<backend::Backend> be_;
  comm::Communicator* grad_comm_;              // comm_ or the NCCL communicator
  std::vector<runtime::RankInfo> rank_table_;  // ComputePlace::ranks
  TrainingData data_;
  BatchPlan plan_;
  std::vector<std::int64_t> pending_shares_;  // set_rank_shares' for the next epoch (or empty)
  std::int64_t steps_per_epoch_ = 0;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LrSchedule> sched_;
  // model.sync_batchnorm on more than one rank: batch statistics summed over the ranks.
  std::unique_ptr<sync::CommBatchStatsReducer> bn_reducer_;
  std::unique_ptr<sync::GradientSync> sync_;  // accumulation and all-reduce (one rank too)
  std::unique_ptr<BatchFeed> feed_;           // batches into the backend's memory
  std::int64_t feed_batch_ = 0;               // the batch slots' size
  std::unique_ptr<ChunkStep> chunks_;         // train.reproducible
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<WeightAverage> ema_;  // train.ema > 0
  std::string whitening_note_;          // start-up lines of patch whitening (rank 0)
  std::unique_ptr<Evaluator> evaluator_;
  RunState state_;
  std::unique_ptr<Checkpointer> checkpointer_;
  comm::StopAgreement stop_;
  std::int64_t segment_ = 1;         // this job segment's number in the run (metrics rows carry it)
  std::int64_t last_step_ = 0;       // steps of the current epoch done
  std::unique_ptr<RunWatch> watch_;  // rank 0: progress lines, TensorBoard
  std::unique_ptr<Trace> trace_;     // every rank with run.trace
};

}  // namespace ddp::train
