#include "ddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <ostream>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/loader.hpp"
#include "ddp/data/transform_description.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/memory_estimate.hpp"
#include "ddp/runtime/runtime.hpp"
#include "ddp/runtime/signals.hpp"
#include "ddp/sync/replica.hpp"
#include "ddp/train/auto_caps.hpp"
#include "ddp/train/chunk_plan.hpp"
#include "ddp/train/epoch_figures.hpp"
#include "ddp/train/fine_tune.hpp"
#include "ddp/train/memory_check.hpp"
#include "ddp/train/patch_whitening.hpp"
#include "ddp/train/progress_log.hpp"
#include "ddp/train/rank_balance.hpp"
#include "ddp/train/reproducible_checks.hpp"
#include "ddp/train/run_banner.hpp"
#include "ddp/train/run_recorder.hpp"
#include "ddp/train/run_watch.hpp"
#include "ddp/train/share_decision.hpp"
#include "ddp/train/trace.hpp"
#include "seconds_since.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;

// The gradient all-reduce's communicator: device gradients cannot travel over the MPI
// communicator (host buffers only).
comm::Communicator* gradient_comm(const backend::Backend& be, comm::Communicator& comm,
                                  comm::Communicator* device_comm) {
  if (be.device() != Device::cpu && comm.size() > 1 && !device_comm)
    throw Error("internal: a GPU trainer over several ranks needs a device communicator (NCCL)");
  return device_comm ? device_comm : &comm;
}

}  // namespace

Trainer::Trainer(const Setup& cfg, comm::Communicator& comm, std::ostream& out, ComputePlace place)
    : cfg_(cfg),
      comm_(comm),
      out_(out),
      be_(place.backend ? std::move(place.backend) : backend::make_cpu_backend()),
      grad_comm_(gradient_comm(*be_, comm, place.grad_comm)),
      rank_table_(std::move(place.ranks)),
      data_(open_training_data(cfg_.data, cfg_.train.seed, comm)),
      plan_(cfg_.train, cfg_.model.sync_batchnorm, comm.size(), comm.rank(), train_set().size(),
            cfg_.train.drop_last),
      stop_(comm) {
  const std::int64_t classes = train_set().num_classes();
  const bool auto_caps = cfg_.train.max_micro_batch.word == "auto";
  const bool measure_cap = auto_caps && be_->device() != Device::cpu;
  // Absurd sizes are refused here, naming the key, instead of ending in std::bad_alloc. A cap yet
  // to be measured is at least one sample.
  check_memory_fits(cfg_, data_.input, plan_.rank_batch(), measure_cap ? 1 : plan_.micro_batch(),
                    *be_);
  model_ = std::make_unique<nn::Model>(cfg_.model.layers, data_.input, classes, *be_);
  loss_ = std::make_unique<nn::SoftmaxCrossEntropy>(*be_, classes, cfg_.train.label_smoothing);
  model_->init_parameters(cfg_.train.seed);
  // Convolutions initialised from the data (init = "patch_whitening"): rank 0 computes them, the
  // broadcast below hands them to every rank.
  if (comm.rank() == 0)
    whitening_note_ = apply_patch_whitening(*model_, *data_.train, data_.norm, cfg_.data,
                                            cfg_.model, cfg_.train.seed);
  freeze_parameters(*model_, cfg_.train);  // before the optimizer: no state for what is frozen
  // Every replica starts from rank 0's weights (identical already by seed; this makes it a fact).
  sync::broadcast_state(comm_, *model_);
  opt_ = make_optimizer(cfg_.optim, *be_, *model_);
  if (auto_caps)
    plan_ = plan_.with_caps(gather_auto_caps(plan_, *be_, *model_, cfg_.model.layers, comm_, out_));
  // (Reproducible mode sums batch-norm statistics over the chunks itself: chunk_step.hpp.)
  if (cfg_.model.sync_batchnorm && comm.size() > 1 && plan_.chunk() == 0) {
    bn_reducer_ = std::make_unique<sync::CommBatchStatsReducer>(*grad_comm_);
    model_->set_batch_stats_reducer(bn_reducer_.get());
  }
  const auto mib = [](double m) { return static_cast<std::size_t>(m * 1024 * 1024); };
  sync_ = std::make_unique<sync::GradientSync>(
      *model_, *grad_comm_,
      sync::SyncOptions{mib(cfg_.comm.bucket_mb), mib(cfg_.comm.first_bucket_mb), cfg_.comm.overlap,
                        plan_.chunk() > 0 ? 1 : plan_.max_micro_batches()});
  steps_per_epoch_ = data::steps_per_epoch(sampler_options());
  if (steps_per_epoch_ == 0)
    throw ConfigError("a global batch of " + std::to_string(plan_.global_batch()) +
                      " with train.drop_last leaves no step: the training set has only " +
                      std::to_string(train_set().size()) + " samples");
  sched_ = std::make_unique<optim::LrSchedule>(cfg_.schedule, cfg_.optim.lr, steps_per_epoch_,
                                               cfg_.train.epochs);
  step_ = std::make_unique<TrainStep>(
      StepParts{*be_, *model_, *loss_, *sync_, *opt_, *sched_},
      LossScaler::configured(cfg_.train.loss_scale, cfg_.runtime.precision == "fp16"),
      cfg_.train.seed, comm.rank(), bn_reducer_ != nullptr);
  if (plan_.chunk() > 0) {
    check_reproducible(*be_, comm_);
    chunks_ = std::make_unique<ChunkStep>(
        *model_, comm_,
        ChunkStepOptions{&cfg_.model.layers, cfg_.train.label_smoothing,
                         sync::SyncOptions{mib(cfg_.comm.bucket_mb), mib(cfg_.comm.first_bucket_mb),
                                           cfg_.comm.overlap, 1},
                         cfg_.model.sync_batchnorm, backend::compute_threads()});
    step_->set_chunks(chunks_.get());
  }
  evaluator_ =
      std::make_unique<Evaluator>(*model_, *be_, *data_.test, data_.norm, cfg_.data,
                                  cfg_.train.seed, comm_, plan_.shares(), plan_.micro_batch());
  evaluator_->set_tta(TestTimeAugmentation(cfg_.eval, data_.input));
  if (cfg_.train.ema > 0.0)
    ema_ =
        std::make_unique<WeightAverage>(cfg_.train, *model_, cfg_.train.epochs * steps_per_epoch_);
  else if (cfg_.eval.weights == "ema")
    throw ConfigError(
        "eval.weights = \"ema\" evaluates the moving average of the weights, "
        "which this run does not keep: set train.ema (e.g. 0.999) or eval.weights");
  checkpointer_ =
      std::make_unique<Checkpointer>(cfg_, comm_, out_, *model_, *opt_, step_->scaler(), state_);
  checkpointer_->set_average(ema_.get());
  reserve_batches();
}

Trainer::~Trainer() = default;

data::SamplerOptions Trainer::sampler_options() const {
  return {.dataset_size = train_set().size(),
          .global_batch = plan_.global_batch(),
          .world_size = comm_.size(),
          .rank = comm_.rank(),
          .shuffle = cfg_.train.shuffle,
          .drop_last = cfg_.train.drop_last,
          .seed = cfg_.train.seed,
          .shares = plan_.shares(),
          .shuffle_window = cfg_.data.shuffle_window,
          .chunks = data_.chunks};
}

void Trainer::reserve_batches() {
  model_->reserve(plan_.micro_batch());
  step_->reserve(plan_.micro_batch(), plan_.rank_batch());
  // The batch slots hold a whole slice; evaluation batches are micro-batches, never larger.
  if (feed_batch_ < plan_.rank_batch()) {
    feed_.reset();
    feed_ = std::make_unique<BatchFeed>(*be_, model_->input_shape().numel(), plan_.rank_batch());
    feed_batch_ = plan_.rank_batch();
  }
  evaluator_->set_shares(plan_.shares(), plan_.micro_batch());
  evaluator_->use_feed(feed_.get());
}

void Trainer::set_rank_shares(const std::vector<std::int64_t>& weights) {
  pending_shares_ = plan_.shares_for(weights);
}

void Trainer::apply_pending_shares() {
  if (pending_shares_.empty()) return;
  const bool changed = pending_shares_ != plan_.shares();
  plan_ = plan_.with_shares(std::move(pending_shares_));
  pending_shares_.clear();
  if (!changed) return;
  reserve_batches();
  out_ << shares_line(plan_);
}

EvalResult Trainer::evaluate(std::vector<float>* logits) {
  // eval.weights: the moving average, once it has started (lookahead copies it into the weights
  // at each epoch's end, so the weights are evaluated then).
  const bool average = ema_ && ema_->started() && !ema_->lookahead() && cfg_.eval.weights != "live";
  if (!average) return evaluator_->evaluate(logits);
  struct Swapped {
    WeightAverage& ema;
    explicit Swapped(WeightAverage& e) : ema(e) { ema.swap_with_model(); }
    ~Swapped() { ema.swap_with_model(); }
  } swapped(*ema_);
  return evaluator_->evaluate(logits);
}

void Trainer::resume() {
  const auto kept = checkpointer_->resume(plan_, steps_per_epoch_);
  if (!kept.empty()) pending_shares_ = kept;
}

void Trainer::save(std::int64_t epoch, std::int64_t step_in_epoch) {
  step_->settle_overflow();  // the loss scale and the optimizer's step count as the weights have
  // The shares the next epoch trains with (set_rank_shares' once given).
  checkpointer_->save(epoch, step_in_epoch,
                      pending_shares_.empty() ? plan_.shares() : pending_shares_,
                      plan_.global_batch(), trace_.get());
}

EpochMetrics Trainer::train_epoch(std::int64_t epoch, std::int64_t first_step, EpochEnd& end) {
  apply_pending_shares();
  // Reproducible mode: whole chunks per rank (chunk_plan.hpp), the same global batches.
  auto batches =
      plan_.chunk() > 0
          ? chunk_batches(sampler_options(), plan_.chunk(), static_cast<std::uint64_t>(epoch))
          : data::epoch_batches(sampler_options(), static_cast<std::uint64_t>(epoch));
  // A resumed epoch continues where the snapshot left it: the batches are a function of
  // (seed, epoch, global batch), not of the number of ranks.
  batches.erase(batches.begin(),
                batches.begin() + std::min<std::ptrdiff_t>(first_step, std::ssize(batches)));
  data::BatchLoader loader(*data_.train, data_.norm, data::train_augmentation(cfg_.data),
                           cfg_.train.seed, plan_.rank_batch(), cfg_.data.prefetch);
  loader.start(std::move(batches), static_cast<std::uint64_t>(epoch));
  feed_->begin(loader);

  const bool show_bar = comm_.rank() == 0 && runtime::stdout_is_terminal();
  ProgressBar bar(show_bar, epoch + 1, cfg_.train.epochs, steps_per_epoch_);
  // On the CPU the loss is checked after every step (reading it costs nothing); on a GPU reading
  // it waits for the device, so only at progress updates and the epoch's end.
  const bool check_every_step = be_->device() == Device::cpu;
  EpochLoss loss = plan_.chunk() > 0
                       ? EpochLoss([this] { return step_->take_chunk_loss(); }, epoch, first_step,
                                   comm_.size(), comm_.rank())
                       : EpochLoss(*loss_, epoch, first_step, comm_.size(), comm_.rank());
  double lr = 0.0;
  std::int64_t seen = 0, global_seen = 0, step = first_step;
  end = {};
  const double wait0 = step_->grad_wait_s();
  const auto t0 = Clock::now();
  if (watch_) watch_->new_epoch();
  auto wait_from = Trace::Clock::now();  // where the data wait of the next step begins
  while (auto b = feed_->take()) {
    const TraceStep traced(trace_.get(), state_.global_step, wait_from);
    lr = step_->run(*b, plan_.step(b->global_size), *feed_, state_.global_step);
    ++state_.global_step;
    if (ema_) ema_->after_step(state_.global_step);
    ++step;
    last_step_ = step;
    seen += b->size;
    global_seen += b->global_size;
    state_.samples_seen += b->global_size;
    if (check_every_step) loss.take(step, state_.global_step);
    if (watch_ && watch_->due(state_.global_step)) {
      if (!check_every_step) loss.take(step, state_.global_step);
      watch_->step(state_.global_step, epoch + 1, cfg_.train.epochs, lr, loss.sum(), seen,
                   state_.samples_seen);
    }
    if (show_bar && (step % 10 == 0 || step == steps_per_epoch_)) {
      if (!check_every_step) loss.take(step, state_.global_step);
      bar.update(step, seen > 0 ? loss.sum() / static_cast<double>(seen) : 0.0,
                 static_cast<double>(global_seen) / seconds_since(t0));
    }
    const auto agreed = stop_.step(runtime::stop_requested(), loss.nonfinite());
    if (agreed.nonfinite_ranks > 0)
      throw diverged_error(epoch, "found by " + std::to_string(agreed.nonfinite_ranks) +
                                      " rank(s) by step " + std::to_string(step - 1));
    if (agreed.stop && step < steps_per_epoch_) {
      end.stopped = true;
      break;
    }
  }
  // A request that arrived with the epoch's last step (or whose agreement completes only now)
  // still stops the run: after this epoch, which is complete. An epoch of one step has no other
  // chance to see it.
  const auto agreed = stop_.finish();
  step_->settle_overflow();
  if (!end.stopped && agreed.stop) end.stop_after = true;
  loss.take(step, state_.global_step);
  step_->collect_step_times(true);
  const double train_s = seconds_since(t0);
  bar.clear();

  // The epoch's totals: a resumed epoch adds what the segments before this one trained of it.
  state_.progress = epoch_totals(
      comm_, loss, seen, step - first_step, train_s, step_->grad_wait_s() - wait0,
      first_step > 0 ? state_.epoch_carry : ckpt::EpochProgress{},
      "step " + std::to_string(step) + ", global step " + std::to_string(state_.global_step));
  // Each rank's batch-norm running statistics saw only its own samples (with sync batch norm they
  // are every rank's already): the ranks average them, weighted by the samples each trained.
  // (In reproducible mode they are the chunks' already, the same on every rank.)
  if (!bn_reducer_ && plan_.chunk() == 0) sync::average_buffers(comm_, *model_, seen);
  if (ema_) ema_->after_epoch(!bn_reducer_ && plan_.chunk() == 0 ? &comm_ : nullptr, seen);
  sync::check_replicas(comm_, *model_, state_.global_step);
  EpochMetrics m = epoch_metrics(state_.progress, epoch, cfg_.train.epochs, segment_, lr);
  // Every rank's speed (one allgather), with its slice of a full global batch this epoch.
  RankSpeed mine = step_->take_epoch(train_s);
  mine.rank = comm_.rank();
  mine.share = plan_.shares()[static_cast<std::size_t>(comm_.rank())];
  m.ranks = gather_rank_speeds(mine, rank_table_, comm_);
  return m;
}

TrainResult Trainer::run() {
  const RunStart start = plan_run_start(cfg_, comm_, out_);
  if (start.config.train.global_batch != cfg_.train.global_batch)
    throw Error(
        "internal: this run keeps another global batch; build the trainer with "
        "plan_run_start's configuration and call run(start)");
  cfg_.train.resume = start.config.train.resume;  // "auto" resolved to the snapshot (or "")
  return run(start);
}

TrainResult Trainer::run(const RunStart& start) {
  const bool root = comm_.rank() == 0;
  if (start.action == RunStart::Action::nothing_to_do) return {};  // plan_run_start said why
  if (start.config.train.resume != cfg_.train.resume)
    throw Error("internal: the trainer was not built with the run start's configuration");
  state_.run_id = start.run_id;
  // A run directory we cannot write fails now, not after hours of training.
  if (root) {
    ckpt::ensure_writable_dir(cfg_.run.dir);
    ckpt::remove_stale_temp_files(cfg_.run.dir);
  }
  resume();
  // train.init: a fresh start takes the file's weights (a resume has its snapshot's).
  if (start.snapshot.empty()) state_.init_from = apply_init(*model_, cfg_.train.init, comm_, out_);
  // Rank 0 records the segment: a previous one still "running" ended without a word.
  RunRecorder record(root, start, cfg_, comm_.size(), state_.start_epoch, state_.start_step);
  segment_ = record.segment();
  try {
    auto result = train_run(record);
    if (trace_) trace_->finish(out_);
    record.ended(result.stopped, runtime::stop_signal());
    return result;
  } catch (const std::exception& e) {
    record.failed(e.what());
    throw;
  }
}

void Trainer::print_banner(std::int64_t segment) {
  out_ << memory_line(comm_);  // collective
  const auto est = nn::estimate_memory(cfg_.model.layers, model_->input_shape(), *be_);
  const std::filesystem::path table = std::filesystem::path(cfg_.run.dir) / "model.txt";
  out_ << model_line(*model_, est.activations_per_sample(), plan_.micro_batch(), table.string());
  if (comm_.rank() == 0) ckpt::write_file_atomically(table, model_->summary() + "\n");
  if (cfg_.run.verbose) out_ << model_->summary() << "\n";
  // The slices the first epoch trains (a resume may bring the snapshot's, applied at its start).
  out_ << data_line(train_set().size(), test_set().size(), model_->input_shape(),
                    train_set().num_classes(), steps_per_epoch_, plan_,
                    pending_shares_.empty() ? plan_.shares() : pending_shares_);
  out_ << data_.note << data::describe_transforms(cfg_.data, data_.norm)
       << freeze_line(*model_, sync_->buckets());
  if (plan_.chunk() > 0) out_ << reproducible_line(plan_, backend::compute_threads());
  out_ << whitening_note_;
  if (ema_) out_ << ema_->describe() << "\n";
  if (evaluator_->tta().views().size() > 1)
    out_ << "eval: test-time augmentation " << evaluator_->tta().name() << " ("
         << evaluator_->tta().views().size() << " views per image)\n";
  out_ << "run: " << state_.run_id << ", segment " << segment << ", in " << cfg_.run.dir << "\n";
  out_.flush();
}

TrainResult Trainer::train_run(RunRecorder& record) {
  const bool root = comm_.rank() == 0;
  const std::int64_t first = state_.global_step, start_epoch = state_.start_epoch;
  std::unique_ptr<MetricsLog> log;
  // metrics.jsonl restarts from the snapshot's rows: rows written after it (by a segment that was
  // killed) are trained again and must not appear twice.
  if (root) log = std::make_unique<MetricsLog>(cfg_.run.dir, state_.history);
  const std::int64_t total_steps =
      first + (cfg_.train.epochs - start_epoch) * steps_per_epoch_ - state_.start_step;
  if (root)
    watch_ = std::make_unique<RunWatch>(out_, cfg_.run, total_steps, first, state_.samples_seen);
  if (cfg_.run.trace) {
    trace_ = std::make_unique<Trace>(cfg_.run.dir, comm_);
    sync_->set_timing(true);
    step_->set_trace(trace_.get());
  }
  print_banner(record.segment());

  TrainResult result;
  state_.segment_t0 = Clock::now();
  for (std::int64_t epoch = start_epoch; epoch < cfg_.train.epochs; ++epoch) {
    EpochEnd end;
    const std::int64_t first_step = epoch == start_epoch ? state_.start_step : 0;
    EpochMetrics m = train_epoch(epoch, first_step, end);
    if (end.stopped) {
      out_ << stop_line(runtime::stop_signal(), epoch, last_step_);
      save(epoch, last_step_);
      result.stopped = true;
      result.last = m;
      result.total_s = state_.run_time_s();
      return result;
    }
    const bool last = epoch + 1 == cfg_.train.epochs;
    after_epoch(epoch, m);
    state_.history += to_json(m) + "\n";
    if (log) log->write_epoch(m);
    if (watch_) watch_->epoch(state_.global_step, m);
    if (trace_) trace_->flush();
    result.last = m;
    const bool save_due = cfg_.train.save_every > 0 && (epoch + 1) % cfg_.train.save_every == 0;
    // The summary goes out before the final snapshot: a run killed in between retrains its last
    // epoch from the previous snapshot (the summary row is dropped with the rows after it), and a
    // final snapshot is never without its summary.
    if (last) {
      result.total_s = state_.run_time_s();
      if (log) log->write_summary(m, result.total_s, comm_.size(), model_->digest(), segment_);
    }
    if (last || save_due || end.stop_after) save(epoch + 1, 0);
    record.epochs_done(epoch + 1);
    if (end.stop_after && !last) {
      out_ << stop_line(runtime::stop_signal(), epoch + 1, 0);
      result.stopped = true;
      result.total_s = state_.run_time_s();
      return result;
    }
  }
  if (start_epoch >= cfg_.train.epochs)
    throw Error("internal: nothing left to train (plan_run_start decides that before)");
  out_ << final_line(result.last, model_->digest());
  out_.flush();
  return result;
}

void Trainer::after_epoch(std::int64_t epoch, EpochMetrics& m) {
  const bool last = epoch + 1 == cfg_.train.epochs;
  if (last || (cfg_.train.eval_every > 0 && (epoch + 1) % cfg_.train.eval_every == 0)) {
    const auto te = Clock::now();
    const TraceSpan traced(trace_.get(), "evaluate", state_.global_step);
    const EvalResult e = evaluate();
    record_evaluation(e, data_.class_names, m);
    m.eval_s = seconds_since(te);
    // The same on every rank (the sums are all-reduced).
    if (!std::isfinite(e.loss))
      throw Error("training diverged: the test loss after epoch " + std::to_string(epoch + 1) +
                  " is not finite (NaN or inf); no snapshot of these weights is written. Lower "
                  "optim.lr (or add warm-up) and resume from the newest snapshot in run.dir");
  }
  out_ << format_epoch_line(m) << " | " << timestamp_now() << "\n";
  const bool auto_shares = cfg_.train.rank_shares.word == "auto";
  if (const auto slow =
          straggler_report(m.ranks, cfg_.train.rebalance_threshold, auto_shares && !last);
      !slow.empty())
    out_ << slow << "\n";
  // rank_shares = auto: all ranks take the same shares, from the next epoch on (and into the
  // snapshot written after this epoch).
  if (auto_shares && !last)
    if (const auto next = agreed_rebalanced_shares(m.ranks, cfg_.train.rebalance_threshold,
                                                   cfg_.train.accumulate, comm_)) {
      set_rank_shares(*next);
      out_ << rebalance_line(m.ranks, *next, epoch + 2) << "\n";
    }
  if (step_->scaler().enabled()) out_ << step_->scaler().summary() << "\n";
  out_.flush();
}

}  // namespace ddp::train
