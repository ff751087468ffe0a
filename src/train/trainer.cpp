#include "ddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <ostream>
#include <tuple>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/class_names.hpp"
#include "ddp/data/distribute.hpp"
#include "ddp/data/loader.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/data/open_dataset.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/data/transform_description.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/memory_estimate.hpp"
#include "ddp/nn/norm_and_bias.hpp"
#include "ddp/rng.hpp"
#include "ddp/runtime/runtime.hpp"
#include "ddp/runtime/signals.hpp"
#include "ddp/sync/replica.hpp"
#include "ddp/train/memory_check.hpp"
#include "ddp/train/progress_log.hpp"
#include "ddp/train/rank_balance.hpp"
#include "ddp/train/tensorboard_writer.hpp"
#include "ddp/train/trace.hpp"
#include "ddp/version_info.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "[3, 1, 2]", as the key is written in a file.
std::string list_text(const std::vector<double>& v) {
  std::string out;
  for (const double x : v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return "[" + out + "]";
}

std::string join(const std::vector<std::int64_t>& v, const char* sep) {
  std::string out;
  for (const auto x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

std::string mib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// "96/48/48"
std::string shares_text(const std::vector<std::int64_t>& shares) {
  std::string t;
  for (const auto v : shares) t += (t.empty() ? "" : "/") + std::to_string(v);
  return t;
}

// "84.0 ms"
std::string format_ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", 1000.0 * s);
  return buf;
}

// A field of /proc/self/status in KiB (0 where unavailable).
std::int64_t proc_status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  return 0;
}

}  // namespace

Trainer::Trainer(const Setup& cfg, comm::Communicator& comm, std::ostream& out, ComputePlace place)
    : cfg_(cfg),
      comm_(comm),
      out_(out),
      be_(place.backend ? std::move(place.backend) : backend::make_cpu_backend()),
      grad_comm_(place.grad_comm ? place.grad_comm : &comm),
      rank_table_(std::move(place.ranks)) {
  // Device gradients cannot travel over the MPI communicator (host buffers only).
  if (be_->device() != Device::cpu && comm.size() > 1 && !place.grad_comm)
    throw Error("internal: a GPU trainer over several ranks needs a device communicator (NCCL)");
  const auto& d = cfg_.data;
  // In memory, shared per node or streamed from disk (limits applied): the loader reads each alike.
  train_data_ = data::open_dataset(d, data::Split::train, cfg_.train.seed, comm_,
                                   backend::compute_threads(), data_note_);
  test_data_ = data::open_dataset(d, data::Split::test, cfg_.train.seed, comm_,
                                  backend::compute_threads(), data_note_);
  if (d.shuffle_window > 0) train_chunks_ = train_data_->chunk_of_samples();
  // A limited set says which samples it holds (start-up line): a subset of one class would score
  // a fake accuracy.
  for (const data::Dataset* set : {train_data_.get(), test_data_.get()})
    if (set->samples().size() < set->source_size())
      data_note_ += "data subset: " + set->samples().origin() + ", " +
                    std::to_string(data::classes_present(set->samples())) + " of " +
                    std::to_string(set->samples().num_classes()) + " classes present\n";
  // The model reads training-sized images; a test split of another size or class count would be
  // read out of bounds or scored against the wrong labels.
  const auto dims = [](const data::SampleSet& s) {
    return std::to_string(s.channels()) + "x" + std::to_string(s.height()) + "x" +
           std::to_string(s.width()) + " in " + std::to_string(s.num_classes()) + " classes";
  };
  // With data.train_size both splits are resized to it, so only channels and classes must agree.
  const std::int64_t side = data::transform_output_side(d);
  if (test_set().channels() != train_set().channels() ||
      test_set().num_classes() != train_set().num_classes() ||
      (side == 0 &&
       (test_set().height() != train_set().height() || test_set().width() != train_set().width())))
    throw DataError("data.root = '" + d.root + "' (" + d.dataset +
                    "): the test split's images are " + dims(test_set()) +
                    " but the training split's are " + dims(train_set()) +
                    ": both splits must have the same channels, size and classes");
  norm_ = data::make_normalization(d, train_set().channels(), &train_set());
  class_names_ = data::class_names(d, train_set().num_classes());

  const std::int64_t world = comm_.size(), k = cfg_.train.accumulate;
  const auto rank = static_cast<std::size_t>(comm_.rank());
  global_batch_ =
      cfg_.train.global_batch > 0 ? cfg_.train.global_batch : cfg_.train.batch_size * world;
  if (global_batch_ < world * k)
    throw ConfigError("train.global_batch = " + std::to_string(global_batch_) +
                      " is smaller than " + std::to_string(world) + " ranks x " +
                      std::to_string(k) +
                      " micro-batches (train.accumulate): every micro-batch needs a sample");
  shares_ = configured_shares();
  for (std::size_t r = 0; r < shares_.size(); ++r)
    if (shares_[r] < k)
      throw ConfigError("train.rank_shares = " + list_text(cfg_.train.rank_shares.numbers) +
                        ": rank " + std::to_string(r) + "'s share of the global batch of " +
                        std::to_string(global_batch_) + " is " + std::to_string(shares_[r]) +
                        " sample(s), fewer than train.accumulate = " + std::to_string(k) +
                        " micro-batches: every micro-batch needs a sample");
  // The caps: a number is every rank's; "auto" is none on the CPU and is measured below on a GPU.
  const auto& max_micro = cfg_.train.max_micro_batch;
  const bool auto_cap = max_micro.word == "auto";
  const bool measure_cap = auto_cap && be_->device() != Device::cpu;
  caps_.assign(static_cast<std::size_t>(world),
               auto_cap ? 0 : static_cast<std::int64_t>(max_micro.numbers.at(0)));
  same_micro_count_ = cfg_.model.sync_batchnorm && world > 1;
  size_batches();

  const Shape input{train_set().channels(), side > 0 ? side : train_set().height(),
                    side > 0 ? side : train_set().width()};
  // Absurd sizes are refused here, naming the key, instead of ending in std::bad_alloc. A cap yet
  // to be measured is at least one sample.
  check_memory_fits(cfg_, input, rank_batch_, measure_cap ? 1 : micro_batch_, *be_);
  model_ = std::make_unique<nn::Model>(cfg_.model.layers, input, train_set().num_classes(), *be_);
  loss_ = std::make_unique<nn::SoftmaxCrossEntropy>(*be_, train_set().num_classes(),
                                                    cfg_.train.label_smoothing);
  // Evaluation scores the plain cross-entropy, without label smoothing.
  eval_loss_ = std::make_unique<nn::SoftmaxCrossEntropy>(*be_, train_set().num_classes(), 0.0);
  model_->init_parameters(cfg_.train.seed);
  // Every replica starts from rank 0's weights (identical already by seed; this makes it a fact).
  sync::broadcast_state(comm_, *model_);
  opt_ = optim::Optimizer::create(cfg_.optim, *be_, model_->params().size(),
                                  nn::norm_and_bias_ranges(*model_));
  if (measure_cap) {
    // What the device has left once the weights, gradients and optimizer state are in it, less
    // the batch slots and an accumulation buffer, in micro-batches of the model's activations.
    const auto est = nn::estimate_memory(cfg_.model.layers, input, *be_);
    const double f = sizeof(float);
    const double sample_bytes =
        f * (est.activations_per_sample() + static_cast<double>(train_set().num_classes()));
    const double fixed_bytes = f * (2.0 * static_cast<double>(rank_batch_ * input.numel()) +
                                    static_cast<double>(model_->grads().size()));
    const auto free_bytes = static_cast<double>(be_->free_memory_bytes());
    const std::int64_t cap = micro_batch_cap_for_memory(free_bytes, fixed_bytes, sample_bytes);
    if (cap < 1)
      throw ConfigError(
          "train.max_micro_batch = auto: rank " + std::to_string(rank) + "'s device has " +
          mib_text(free_bytes) + " free once the model is in it, not enough for the batch slots (" +
          mib_text(fixed_bytes) + ") and one sample's activations (" + mib_text(sample_bytes) +
          "); use a smaller model or train.batch_size, or another device");
    caps_[rank] = cap;
  }
  // Every rank's cap, for the micro-batch counts sync batch norm makes all ranks agree on.
  if (auto_cap && world > 1) {
    const std::int64_t mine = caps_[rank];
    comm_.allgather(std::as_bytes(std::span<const std::int64_t>(&mine, 1)),
                    std::as_writable_bytes(std::span<std::int64_t>(caps_)));
  }
  if (measure_cap) {
    size_batches();
    out_ << "train.max_micro_batch = auto: micro-batches of at most " << join(caps_, ", ")
         << " sample(s) (rank 0 first)\n";
  }
  if (cfg_.model.sync_batchnorm && world > 1) {
    bn_reducer_ = std::make_unique<sync::CommBatchStatsReducer>(*grad_comm_);
    model_->set_batch_stats_reducer(bn_reducer_.get());
  }
  const auto mib = [](double m) { return static_cast<std::size_t>(m * 1024 * 1024); };
  sync_ = std::make_unique<sync::GradientSync>(
      *model_, *grad_comm_,
      sync::SyncOptions{mib(cfg_.comm.bucket_mb), mib(cfg_.comm.first_bucket_mb), cfg_.comm.overlap,
                        max_micro_batches_});
  // fp16 gradients underflow without loss scaling; train.loss_scale > 0 asks for it on any
  // precision (and sets where it starts).
  if (cfg_.train.loss_scale > 0)
    scaler_ = LossScaler(cfg_.train.loss_scale);
  else if (cfg_.runtime.precision == "fp16")
    scaler_ = LossScaler(65536.0);
  if (const char* f = std::getenv("DDP_FAULT_INF_GRAD")) {
    long long r = -1, s = -1;
    if (std::sscanf(f, "%lld:%lld", &r, &s) != 2 || r < 0 || s < 0)
      throw ConfigError(std::string("DDP_FAULT_INF_GRAD = '") + f +
                        "': expected RANK:STEP (test-only fault injection)");
    fault_inf_rank_ = static_cast<int>(r);
    fault_inf_step_ = s;
  }
  reserve_batches();

  steps_per_epoch_ = data::steps_per_epoch(sampler_options());
  if (steps_per_epoch_ == 0)
    throw ConfigError("a global batch of " + std::to_string(global_batch_) +
                      " with train.drop_last leaves no step: the training set has only " +
                      std::to_string(train_set().size()) + " samples");
  sched_ = std::make_unique<optim::LrSchedule>(cfg_.schedule, cfg_.optim.lr, steps_per_epoch_,
                                               cfg_.train.epochs);
}

Trainer::~Trainer() = default;

data::SamplerOptions Trainer::sampler_options() const {
  data::SamplerOptions so;
  so.dataset_size = train_set().size();
  so.global_batch = global_batch_;
  so.world_size = comm_.size();
  so.rank = comm_.rank();
  so.shuffle = cfg_.train.shuffle;
  so.drop_last = cfg_.train.drop_last;
  so.seed = cfg_.train.seed;
  so.shares = shares_;
  so.shuffle_window = cfg_.data.shuffle_window;
  so.chunks = train_chunks_;
  return so;
}

std::vector<std::int64_t> Trainer::configured_shares() const {
  const auto& s = cfg_.train.rank_shares;
  const int world = comm_.size();
  // "auto" starts equal; the measured shares come through set_rank_shares.
  if (!s.word.empty()) return data::slice_sizes(global_batch_, data::equal_shares(world));
  const std::string key = "train.rank_shares = " + list_text(s.numbers);
  if (std::ssize(s.numbers) != world)
    throw ConfigError(key + ": " + std::to_string(s.numbers.size()) + " share(s) for " +
                      std::to_string(world) +
                      " rank(s): give one share per rank (or \"equal\", "
                      "\"auto\")");
  const auto sizes = data::slice_sizes(global_batch_, std::span<const double>(s.numbers));
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] > 0) continue;
    // The smallest global batch that gives every rank a sample (largest remainders are not
    // monotone in the batch, so it is searched; by sum / smallest share every quota is >= 1).
    double total = 0.0, smallest = s.numbers[0];
    for (const double w : s.numbers) {
      total += w;
      smallest = std::min(smallest, w);
    }
    // Shares as uneven as 1e-300 : 1 put the bound beyond any batch (and any integer).
    const double bound_d = std::ceil(total / smallest);
    const std::int64_t bound = bound_d < 1e12 ? static_cast<std::int64_t>(bound_d) : 0;
    std::int64_t least = bound;
    for (std::int64_t g = global_batch_ + 1; g < std::min(bound, global_batch_ + 1000000); ++g) {
      const auto t = data::slice_sizes(g, std::span<const double>(s.numbers));
      if (std::all_of(t.begin(), t.end(), [](std::int64_t n) { return n > 0; })) {
        least = g;
        break;
      }
    }
    throw ConfigError(key + ": rank " + std::to_string(r) +
                      " gets no sample of the global batch of " + std::to_string(global_batch_) +
                      " (train.global_batch): every rank needs at least one; " +
                      (least > 0 ? "a global batch of at least " + std::to_string(least) +
                                       " gives each rank one, or raise rank "
                                 : std::string("raise rank ")) +
                      std::to_string(r) + "'s share");
  }
  return sizes;
}

MicroBatchPlan Trainer::step_plan(std::int64_t global_size) const {
  const auto slices = data::slice_sizes(global_size, std::span<const std::int64_t>(shares_));
  return plan_micro_batches(slices, caps_, cfg_.train.accumulate, comm_.rank(), same_micro_count_);
}

void Trainer::size_batches() {
  rank_batch_ = 1;
  micro_batch_ = 1;
  max_micro_batches_ = 1;
  // The configured global batch and the epoch's short last one: largest remainders can give a
  // rank more of a smaller batch.
  std::vector<std::int64_t> sizes = {global_batch_};
  if (train_set().size() > 0)
    for (const auto g : data::global_batch_sizes(sampler_options())) sizes.push_back(g);
  for (const auto g : sizes) {
    const MicroBatchPlan p = step_plan(g);
    rank_batch_ = std::max(rank_batch_, p.samples);
    micro_batch_ = std::max(micro_batch_, p.largest());
    max_micro_batches_ = std::max(max_micro_batches_, p.total);
  }
}

void Trainer::reserve_batches() {
  const Shape input = model_->input_shape();
  const std::int64_t classes = model_->num_classes();
  model_->reserve(micro_batch_);
  if (dlogits_.empty() || dlogits_.numel() < micro_batch_ * classes)
    dlogits_ = be_->alloc(Shape{micro_batch_, classes});
  if (std::ssize(sample_ids_) < rank_batch_)
    sample_ids_.resize(static_cast<std::size_t>(rank_batch_));
  // The batch slots hold a whole slice; evaluation batches are micro-batches, never larger.
  if (feed_batch_ < rank_batch_) {
    feed_.reset();
    feed_ = std::make_unique<BatchFeed>(*be_, input.numel(), rank_batch_);
    feed_batch_ = rank_batch_;
  }
  if (!step_timer_ && be_->device() != Device::cpu)
    if (auto* q = dynamic_cast<backend::DeviceQueue*>(be_.get()))
      step_timer_ = std::make_unique<DeviceStepTimer>(*q);
}

void Trainer::set_rank_shares(const std::vector<std::int64_t>& weights) {
  if (std::ssize(weights) != comm_.size())
    throw Error("set_rank_shares: " + std::to_string(weights.size()) + " share(s) for " +
                std::to_string(comm_.size()) + " rank(s)");
  for (const auto w : weights)
    if (w <= 0) throw Error("set_rank_shares: share " + std::to_string(w) + " is not positive");
  auto sizes = data::slice_sizes(global_batch_, std::span<const std::int64_t>(weights));
  for (std::size_t r = 0; r < sizes.size(); ++r)
    if (sizes[r] < cfg_.train.accumulate)
      throw Error("set_rank_shares: shares " + join(weights, ", ") + " give rank " +
                  std::to_string(r) + " " + std::to_string(sizes[r]) +
                  " sample(s) of the global batch of " + std::to_string(global_batch_) +
                  ", fewer than its " + std::to_string(cfg_.train.accumulate) + " micro-batch(es)");
  pending_shares_ = std::move(sizes);
}

void Trainer::apply_pending_shares() {
  if (pending_shares_.empty()) return;
  const bool changed = pending_shares_ != shares_;
  shares_ = std::move(pending_shares_);
  pending_shares_.clear();
  if (!changed) return;
  size_batches();
  reserve_batches();
  out_ << "rank shares: " << join(shares_, " + ") << " samples of each global batch of "
       << global_batch_ << "\n";
}

void Trainer::train_step(const data::Batch& batch) {
  const Shape input = model_->input_shape();
  const std::int64_t per_sample = input.numel();
  const MicroBatchPlan plan = step_plan(batch.global_size);
  if (plan.samples != batch.size)
    throw Error("internal: a slice of " + std::to_string(batch.size) + " samples, planned " +
                std::to_string(plan.samples));
  auto grads = model_->grads();
  nn::StepContext ctx{nn::Mode::train,
                      hash_words(cfg_.train.seed, static_cast<std::uint64_t>(RngStream::dropout),
                                 static_cast<std::uint64_t>(global_step_)),
                      sample_ids_.data()};
  // Dropout masks are keyed by epoch-order position: the same whatever the split over ranks.
  for (std::int64_t i = 0; i < batch.size; ++i)
    sample_ids_[static_cast<std::size_t>(i)] = batch.global_offset + i;

  if (step_timer_) step_timer_->start();
  sync_->begin(plan.total);
  for (std::int64_t m = 0; m < plan.total; ++m) {
    const auto [b, e] = plan.range(m);
    const std::int64_t len = e - b;
    if (len == 0) {
      // No samples here: a zero gradient, and sync batch norm's collectives joined (the other
      // ranks' forward and backward make them, in order).
      be_->fill(static_cast<std::int64_t>(grads.size()), 0.0f, grads.data());
      if (bn_reducer_) model_->step_without_samples(sync_->hook());
    } else {
      // Compute (forward + backward) of micro-batch m starts here.
      ctx.sample_ids = sample_ids_.data() + b;
      std::optional<TraceSpan> phase(std::in_place, trace_.get(), "forward", global_step_);
      const Tensor x = Tensor::view(const_cast<float*>(batch.images + b * per_sample),
                                    input.with_batch(len), be_->device());
      const Tensor& logits = model_->forward(x, ctx);
      const Tensor dl = dlogits_.first(len);
      // Gradient of the global batch's mean loss: scale by the global size; the all-reduce sums.
      // Times the loss scale, which the step divides out again (train_epoch).
      loss_->forward_backward(logits, batch.labels + b,
                              scaler_.scale() / static_cast<double>(batch.global_size), dl);
      if (m == 0 && comm_.rank() == fault_inf_rank_ && global_step_ == fault_inf_step_) {
        std::fprintf(stderr,
                     "ddp_train: fault injection (DDP_FAULT_INF_GRAD, test only): rank %d "
                     "overflows its gradient at step %lld\n",
                     comm_.rank(), static_cast<long long>(global_step_));
        // An inf in the loss gradient that backward spreads into the parameter gradients.
        be_->fill(1, std::numeric_limits<float>::infinity(), dl.data());
      }
      // The hook starts bucket all-reduces during the last micro-batch; it never waits.
      phase.emplace(trace_.get(), "backward", global_step_);
      model_->backward(dl, sync_->hook());
      // Compute of micro-batch m ends here.
    }
    sync_->after_micro_batch();
  }
  if (step_timer_) step_timer_->backward_done();
  // Waits for every rank's gradients (the sum over all ranks and micro-batches); on a GPU the
  // compute stream waits, not the host (NCCL in training orders its blocking all-reduce of device
  // memory the same way, so comm.overlap = false does not make the host wait either).
  {
    const TraceSpan wait(trace_.get(), "gradient wait", global_step_);
    sync_->finish();
  }
  if (step_timer_) step_timer_->gradients_ready(batch.size);
  // The next batch is staged while the device computes this one (after finish(), which starts
  // the last buckets).
  feed_->prefetch();
  if (trace_)
    for (const auto& t : sync_->bucket_times())
      trace_->all_reduce(t.bucket, t.start, t.end, global_step_);
}

void Trainer::settle_overflow(std::size_t keep) {
  while (overflow_pending_.size() > keep) {
    const auto [slot, scale] = overflow_pending_.front();
    overflow_pending_.pop_front();
    const bool overflow = be_->overflow_seen(slot);
    scaler_.update_late(!overflow, scale);
    if (overflow) opt_->step_was_skipped();
  }
}

double Trainer::grad_wait_s() const {
  return step_timer_ ? device_wait_s_ : sync_->stats().exposed_s;
}

void Trainer::collect_step_times(bool wait_for_all) {
  if (!step_timer_) return;
  for (const auto& t : step_timer_->collect(wait_for_all)) {
    step_meter_.add_step(t.compute_s, t.wait_s, t.samples);
    device_wait_s_ += t.wait_s;
  }
}

EpochMetrics Trainer::train_epoch(std::int64_t epoch, std::int64_t first_step, bool& stopped,
                                  bool& stop_after) {
  apply_pending_shares();
  auto batches = data::epoch_batches(sampler_options(), static_cast<std::uint64_t>(epoch));
  // A resumed epoch continues where the snapshot left it: the batches are a function of
  // (seed, epoch, global batch), not of the number of ranks.
  batches.erase(batches.begin(),
                batches.begin() + std::min<std::ptrdiff_t>(first_step, std::ssize(batches)));
  const data::Augmentation aug = data::train_augmentation(cfg_.data);
  data::BatchLoader loader(*train_data_, norm_, aug, cfg_.train.seed, rank_batch_,
                           cfg_.data.prefetch);
  loader.start(std::move(batches), static_cast<std::uint64_t>(epoch));
  feed_->begin(loader);

  auto params = model_->params();
  auto grads = model_->grads();
  const bool show_bar = comm_.rank() == 0 && runtime::stdout_is_terminal();
  ProgressBar bar(show_bar, epoch + 1, cfg_.train.epochs, steps_per_epoch_);
  // On the CPU the loss is checked after every step (reading it costs nothing); on a GPU reading
  // it waits for the device, so only at progress updates and the epoch's end.
  const bool check_every_step = be_->device() == Device::cpu;
  double loss_sum = 0.0;
  std::int64_t correct = 0, seen = 0, global_seen = 0, step = first_step;
  std::int64_t checked_step = first_step;  // the loss was finite up to here
  std::int64_t nonfinite_at = 0;           // the step whose check found it not finite (0: none)
  double lr = 0.0;
  stopped = false;
  stop_after = false;
  const double wait0 = grad_wait_s();
  const auto t0 = Clock::now();
  auto diverged = [&](const std::string& where) {
    return Error("training diverged: the loss is not finite (NaN or inf) in epoch " +
                 std::to_string(epoch + 1) + ", " + where +
                 "; no snapshot of these weights is written, the newest snapshot in run.dir "
                 "holds the last finite ones. Lower optim.lr (or add warm-up) and resume from it");
  };
  auto take_loss = [&] {
    const auto r = loss_->take();  // waits for a GPU: only at bar updates and the epoch's end
    loss_sum += r.loss_sum;
    correct += r.correct;
    // NaN/inf weights would go on into every later step and snapshot. One rank alone stops
    // at once; several agree first (the stop flags, a step later), so all stop at one step.
    if (!std::isfinite(loss_sum) && nonfinite_at == 0) {
      nonfinite_at = step;
      const std::string where =
          step == checked_step + 1
              ? "step " + std::to_string(step)
              : "steps " + std::to_string(checked_step + 1) + ".." + std::to_string(step);
      if (comm_.size() == 1)
        throw diverged(where + " (global step " + std::to_string(global_step_) + ")");
      std::fprintf(stderr, "ddp_train: rank %d: the loss is not finite in epoch %lld, %s\n",
                   comm_.rank(), static_cast<long long>(epoch + 1), where.c_str());
    }
    checked_step = step;
  };
  if (progress_log_) progress_log_->new_epoch();
  auto wait_from = Trace::Clock::now();  // where the data wait of the next step begins
  while (auto b = feed_->take()) {
    const TraceStep traced(trace_.get(), global_step_, wait_from);
    lr = sched_->at(global_step_);
    // Rank speed: the step's forward + backward is its time less its wait for the gradients. On a
    // GPU both are timed on the device and read once it has passed them (device_step_timer.hpp).
    const double wait_before = grad_wait_s();
    const auto step_t0 = Clock::now();
    train_step(*b);
    if (step_timer_) {
      collect_step_times(false);
    } else {
      const double step_wait = grad_wait_s() - wait_before;
      step_meter_.add_step(seconds_since(step_t0) - step_wait, step_wait, b->size);
    }
    // With loss scaling: the all-reduced gradients are unscaled and checked; an overflow on any
    // rank is in every rank's sum, so all ranks skip the same steps.
    {
      const TraceSpan optimizer(trace_.get(), "optimizer", global_step_);
      const auto count = static_cast<std::int64_t>(grads.size());
      const auto inv_scale = static_cast<float>(1.0 / scaler_.scale());
      if (!scaler_.enabled()) {
        opt_->step(params, grads, lr);
      } else if (be_->host_addressable() || opt_->needs_applied_step_count()) {
        // The CPU reads the flag at no cost. Adam's bias correction needs the count of applied
        // steps when it is enqueued, so with Adam a GPU reads it every step too.
        if (scaler_.update(be_->unscale_check(count, grads.data(), inv_scale)))
          opt_->step(params, grads, lr);
      } else {
        // The device skips an overflowing step itself; the scaler learns of it a step later, so
        // the host never waits for the step it has just enqueued.
        const int slot = static_cast<int>(global_step_ % backend::Backend::kOverflowSlots);
        opt_->step(params, grads, lr, be_->unscale_flag(count, grads.data(), inv_scale, slot));
        overflow_pending_.push_back({slot, scaler_.scale()});
        settle_overflow(1);
      }
    }
    ++global_step_;
    ++step;
    last_step_ = step;
    seen += b->size;
    global_seen += b->global_size;
    samples_seen_ += b->global_size;
    if (check_every_step) take_loss();
    if (progress_log_ && progress_log_->due(global_step_)) {
      if (!check_every_step) take_loss();
      const auto iv = progress_log_->line(global_step_, epoch + 1, cfg_.train.epochs, lr, loss_sum,
                                          seen, samples_seen_);
      if (tensorboard_ && progress_log_->on_step_grid(global_step_))
        tensorboard_->scalars(global_step_, {{"step/train_loss", iv.train_loss},
                                             {"step/lr", lr},
                                             {"step/images_per_s", iv.images_per_s}});
    }
    if (show_bar && (step % 10 == 0 || step == steps_per_epoch_)) {
      if (!check_every_step) take_loss();
      bar.update(step, seen > 0 ? loss_sum / static_cast<double>(seen) : 0.0,
                 static_cast<double>(global_seen) / seconds_since(t0));
    }
    // All ranks agree whether any of them was asked to stop, one step late: the flags of step k
    // are summed while step k+1 computes, so agreeing costs no synchronisation point of its own
    // (a blocking all-reduce here made every step wait for the slowest rank twice).
    if (comm_.size() == 1) {
      stop_flags_[0] = runtime::stop_requested() ? 1.0f : 0.0f;
    } else {
      if (!stop_request_.empty()) comm_.wait(stop_request_);  // started a step ago
      const float agreed = stop_flags_[0], agreed_nonfinite = stop_flags_[1];
      if (agreed_nonfinite > 0.0f)
        throw diverged("found by " + std::to_string(static_cast<int>(agreed_nonfinite)) +
                       " rank(s) by step " + std::to_string(step - 1));
      stop_flags_[0] = runtime::stop_requested() ? 1.0f : 0.0f;
      stop_flags_[1] = nonfinite_at > 0 ? 1.0f : 0.0f;
      if (agreed > 0.0f && step < steps_per_epoch_) {
        stopped = true;
        break;
      }
      stop_request_ = comm_.iallreduce_sum(std::span<float>(stop_flags_, 2));
      continue;
    }
    if (stop_flags_[0] > 0.0f && step < steps_per_epoch_) {
      stopped = true;
      break;
    }
  }
  // A request that arrived with the epoch's last step (or whose agreement completes only now)
  // still stops the run: after this epoch, which is complete. An epoch of one step has no other
  // chance to see it.
  if (!stop_request_.empty()) comm_.wait(stop_request_);
  settle_overflow(0);
  if (!stopped && stop_flags_[0] > 0.0f) stop_after = true;
  stop_flags_[0] = stop_flags_[1] = 0.0f;
  take_loss();
  collect_step_times(true);
  const double train_s = seconds_since(t0);
  bar.clear();

  double sums[1] = {loss_sum};
  std::int64_t counts[2] = {correct, seen};
  if (comm_.size() > 1) {
    comm_.allreduce_sum(std::span<double>(sums, 1));
    comm_.allreduce_sum(std::span<std::int64_t>(counts, 2));
  }
  // The sums are every rank's: all ranks stop here together when one rank's loss was not finite.
  if (!std::isfinite(sums[0]))
    throw diverged("by its end (step " + std::to_string(step) + ", global step " +
                   std::to_string(global_step_) + ")");
  // Each rank's batch-norm running statistics saw only its own samples (with sync batch norm they
  // are every rank's already): the ranks average them, weighted by the samples each trained.
  if (!bn_reducer_) sync::average_buffers(comm_, *model_, seen);
  sync::check_replicas(comm_, *model_, global_step_);
  // The epoch's totals: a resumed epoch adds what the segments before this one trained of it.
  const ckpt::EpochProgress carry = first_step > 0 ? epoch_carry_ : ckpt::EpochProgress{};
  progress_.loss_sum = carry.loss_sum + sums[0];
  progress_.correct = carry.correct + counts[0];
  progress_.samples = carry.samples + counts[1];
  progress_.steps = carry.steps + (step - first_step);
  progress_.train_s = carry.train_s + train_s;
  progress_.comm_wait_s = carry.comm_wait_s + grad_wait_s() - wait0;
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.epochs = cfg_.train.epochs;
  m.segment = segment_;
  m.steps = progress_.steps;
  const auto samples = static_cast<double>(progress_.samples);
  m.train_loss = progress_.samples > 0 ? progress_.loss_sum / samples : 0.0;
  m.train_acc = progress_.samples > 0 ? static_cast<double>(progress_.correct) / samples : 0.0;
  m.lr = lr;
  m.epoch_s = progress_.train_s;
  m.comm_wait_s = progress_.comm_wait_s;
  m.images_per_s = progress_.train_s > 0 ? samples / progress_.train_s : 0.0;
  // Every rank's speed (one allgather), with its slice of a full global batch this epoch.
  RankSpeed mine = step_meter_.take_epoch(train_s);
  mine.rank = comm_.rank();
  mine.share = shares_[static_cast<std::size_t>(comm_.rank())];
  m.ranks = gather_rank_speeds(mine, rank_table_, comm_);
  return m;
}

EvalResult Trainer::evaluate(std::vector<float>* all_logits) {
  // Each rank takes a contiguous shard of the test set sized by its share; no padding, so every
  // sample counts once.
  const std::int64_t batch = micro_batch_;
  auto batches = data::eval_batches(test_set().size(), comm_.size(), comm_.rank(), shares_, batch);
  // The samples in the order the batches bring them: their labels and places for the confusion
  // matrix and the logits.
  std::vector<std::int64_t> order;
  for (const auto& rb : batches) order.insert(order.end(), rb.indices.begin(), rb.indices.end());
  data::BatchLoader loader(*test_data_, norm_, data::eval_augmentation(cfg_.data), cfg_.train.seed,
                           batch, cfg_.data.prefetch);
  loader.start(std::move(batches), 0);
  feed_->begin(loader);
  const Shape input = model_->input_shape();
  const std::int64_t classes = train_set().num_classes();
  EvalResult e;
  e.confusion = Confusion(classes);
  if (all_logits) all_logits->assign(static_cast<std::size_t>(test_set().size() * classes), 0.0f);
  std::vector<float> host_logits;
  std::vector<std::int32_t> labels;
  std::int64_t counts[2] = {0, 0};  // correct, samples
  while (auto b = feed_->take()) {
    const Tensor x =
        Tensor::view(const_cast<float*>(b->images), input.with_batch(b->size), be_->device());
    const Tensor& logits = model_->forward(x, nn::StepContext{nn::Mode::eval, 0, nullptr});
    eval_loss_->score(logits, b->labels);
    feed_->prefetch();  // staged while the device computes these logits
    // The predictions, on the host (a few floats per sample), for the confusion matrix.
    const float* host = logits.data();
    if (!be_->host_addressable()) {
      host_logits.resize(static_cast<std::size_t>(logits.numel()));
      be_->download(logits.data(), host_logits.data(), host_logits.size());
      host = host_logits.data();
    }
    labels.resize(static_cast<std::size_t>(b->size));
    for (std::int64_t i = 0; i < b->size; ++i)
      labels[static_cast<std::size_t>(i)] =
          test_set().label(order[static_cast<std::size_t>(counts[1] + i)]);
    e.confusion.add(host, labels.data(), b->size);
    if (all_logits)
      for (std::int64_t i = 0; i < b->size; ++i)
        std::copy_n(host + i * classes, classes,
                    all_logits->data() + order[static_cast<std::size_t>(counts[1] + i)] * classes);
    counts[1] += b->size;
  }
  const auto res = eval_loss_->take();
  double loss = res.loss_sum;
  counts[0] = res.correct;
  if (comm_.size() > 1) {
    comm_.allreduce_sum(std::span<double>(&loss, 1));
    comm_.allreduce_sum(std::span<std::int64_t>(counts, 2));
    // Every rank filled only its own samples' rows (the rest are 0), so the sum is every row.
    if (all_logits) comm_.allreduce_sum(std::span<float>(*all_logits));
  }
  e.confusion.allreduce(comm_);
  e.samples = counts[1];
  if (e.samples > 0) {
    e.loss = loss / static_cast<double>(e.samples);
    e.accuracy = static_cast<double>(counts[0]) / static_cast<double>(e.samples);
  }
  return e;
}

void Trainer::resume() {
  const auto& r = cfg_.train.resume;
  if (r.empty()) return;
  const std::filesystem::path dir = cfg_.run.dir;
  // Rank 0 reads the snapshot (the run directory need not be shared); the state travels over MPI.
  // found, epoch, step, samples, global step, opt steps, loss-scale good steps, and the resumed
  // epoch's totals so far: correct, samples, steps
  std::vector<std::int64_t> pos(10, 0);
  // loss scale, the run's training time, the epoch's loss sum, training and waiting time
  std::vector<double> reals(5, 0.0);
  std::string history;
  std::vector<std::int64_t> shares;  // the snapshot's rank shares (empty: none kept)
  std::exception_ptr error;
  if (comm_.rank() == 0) try {
      std::optional<std::filesystem::path> file;
      if (r == "auto") {
        file = ckpt::find_latest(dir, [this](const std::string& w) {
          std::fprintf(stderr, "ddp_train: warning: %s\n", w.c_str());
          out_ << "warning: " << w << "\n";
        });
        if (!file) out_ << "resume: no snapshot in " << dir.string() << ", starting from scratch\n";
      } else {
        file = std::filesystem::path(r);
      }
      if (file) {
        const ckpt::Snapshot snap = ckpt::read_snapshot(*file);
        ckpt::restore(snap, *model_, *opt_);
        const auto& p = snap.meta.position;
        const auto& e = snap.meta.epoch_progress;
        pos = {1,
               p.epoch,
               p.step_in_epoch,
               p.samples_seen,
               p.global_step,
               snap.optimizer_steps,
               snap.meta.loss_scale_good_steps,
               e.correct,
               e.samples,
               e.steps};
        reals = {snap.meta.loss_scale, snap.meta.run_train_s, e.loss_sum, e.train_s, e.comm_wait_s};
        history = snap.meta.metrics_jsonl;
        shares = snap.meta.rank_shares;
        out_ << "resume: " << file->string() << " (epoch " << p.epoch << ", step "
             << p.step_in_epoch << ", written by " << snap.meta.world_size << " rank(s))\n";
      }
    } catch (const Error&) {
      error = std::current_exception();
      pos[0] = -1;
    }
  // The other ranks learn that rank 0 failed instead of waiting for state that never comes.
  if (comm_.size() > 1) {
    std::int64_t status = pos[0];
    comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(&status, 1)), 0);
    if (status < 0 && comm_.rank() != 0)
      throw Error("rank 0 could not resume from its snapshot (see its error)");
  }
  if (error) std::rethrow_exception(error);
  if (comm_.size() > 1) {
    comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(pos)), 0);
    comm_.broadcast(std::as_writable_bytes(std::span<double>(reals)), 0);
    if (pos[0]) {
      // Rank 0 restored into its host mirrors; they travel over MPI and go to each backend.
      sync::broadcast_state(comm_, *model_, opt_.get());
      std::int64_t len[2] = {static_cast<std::int64_t>(history.size()),
                             static_cast<std::int64_t>(shares.size())};
      comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(len, 2)), 0);
      history.resize(static_cast<std::size_t>(len[0]));
      comm_.broadcast(std::as_writable_bytes(std::span<char>(history.data(), history.size())), 0);
      shares.resize(static_cast<std::size_t>(len[1]));
      comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(shares)), 0);
    }
  }
  if (!pos[0]) return;
  start_epoch_ = pos[1];
  start_step_ = pos[2];
  samples_seen_ = pos[3];
  global_step_ = pos[4];
  opt_->set_steps_taken(pos[5]);
  // The scale the run had reached (a snapshot without one leaves the configured start).
  if (scaler_.enabled() && reals[0] > 0) scaler_.restore(reals[0], pos[6]);
  run_train_s_ = reals[1];
  epoch_carry_ = {reals[2], pos[7], pos[8], pos[9], reals[3], reals[4]};
  history_ = history;
  // train.rank_shares = auto keeps the shares the run had measured, on as many ranks and with the
  // same global batch; otherwise it starts equal again (and a given list is the configuration's).
  if (cfg_.train.rank_shares.word == "auto" && !shares.empty()) {
    const bool fits =
        std::ssize(shares) == comm_.size() &&
        std::accumulate(shares.begin(), shares.end(), std::int64_t{0}) == global_batch_ &&
        std::all_of(shares.begin(), shares.end(),
                    [&](std::int64_t n) { return n >= cfg_.train.accumulate; });
    if (fits) {
      set_rank_shares(shares);
      out_ << "resume: rank shares " << join(shares, " + ")
           << " kept from the snapshot (train.rank_shares = auto)\n";
    } else {
      out_ << "resume: the snapshot's rank shares (" << join(shares, " + ")
           << ") were for another world size or global batch; starting from equal shares\n";
    }
  }
  if (start_step_ >= steps_per_epoch_) {
    // A mid-epoch snapshot of a run with another global batch: its step count does not fit.
    throw ConfigError("snapshot position epoch " + std::to_string(start_epoch_) + " step " +
                      std::to_string(start_step_) + " does not fit " +
                      std::to_string(steps_per_epoch_) +
                      " steps per epoch: resume with the global batch the run was started with");
  }
}

void Trainer::save(std::int64_t epoch, std::int64_t step_in_epoch) {
  settle_overflow(0);  // the loss scale and the optimizer's step count as the weights have them
  if (comm_.rank() != 0) return;
  const TraceSpan traced(trace_.get(), "snapshot", global_step_);
  // The last update of an epoch can blow up after its loss was checked: a snapshot of NaN/inf
  // weights would become the newest, and pruning could remove the last good one.
  model_->pull_state();
  for (const float w : model_->host_params())
    if (!std::isfinite(w))
      throw Error("training diverged: weights are not finite (NaN or inf) after epoch " +
                  std::to_string(step_in_epoch > 0 ? epoch + 1 : epoch) + " (global step " +
                  std::to_string(global_step_) +
                  "); no snapshot of them is written, the newest snapshot in run.dir holds the "
                  "last finite ones. Lower optim.lr (or add warm-up) and resume from it");
  ckpt::SnapshotMeta meta;
  meta.position = {epoch, step_in_epoch, samples_seen_, global_step_};
  meta.seed = cfg_.train.seed;
  meta.world_size = comm_.size();
  meta.config_toml = cfg_.resolved_toml;
  meta.metrics_jsonl = history_;
  meta.program_version = DDP_VERSION_STRING;
  meta.run_id = run_id_;
  meta.global_batch = global_batch_;
  meta.run_train_s = run_train_s_ + seconds_since(segment_t0_);
  if (step_in_epoch > 0) meta.epoch_progress = progress_;
  // The shares the next epoch trains with (set_rank_shares' once given).
  meta.rank_shares = pending_shares_.empty() ? shares_ : pending_shares_;
  if (scaler_.enabled()) {
    meta.loss_scale = scaler_.scale();
    meta.loss_scale_good_steps = scaler_.good_steps();
  }
  const std::string name =
      step_in_epoch > 0 ? ckpt::snapshot_name(epoch, step_in_epoch) : ckpt::snapshot_name(epoch);
  const std::filesystem::path file = std::filesystem::path(cfg_.run.dir) / name;
  const auto t0 = Clock::now();
  ckpt::write_snapshot(file, *model_, *opt_, cfg_.optim.name, meta);
  ckpt::prune(cfg_.run.dir, static_cast<int>(cfg_.train.keep_last), run_id_, meta.position);
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.3f s)", seconds_since(t0));
  out_ << "snapshot: " << file.string() << buf << "\n";
  out_.flush();
}

void Trainer::write_record(RunRecord* record) {
  if (record) write_run_record(cfg_.run.dir, *record);
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
  run_id_ = start.run_id;
  // A run directory we cannot write fails now, not after hours of training.
  if (root) {
    ckpt::ensure_writable_dir(cfg_.run.dir);
    ckpt::remove_stale_temp_files(cfg_.run.dir);
  }
  resume();
  // Rank 0 records the segment: a previous one still "running" ended without a word.
  std::optional<RunRecord> record;
  if (root) {
    record = start.record.value_or(RunRecord{});
    for (auto& s : record->segments)
      if (s.exit == "running") s.exit = "ended without a word (killed, or its node failed)";
    record->run_id = run_id_;
    record->status = "running";
    record->config_hash = config_hash(cfg_.resolved_toml);
    record->epochs = cfg_.train.epochs;
    record->epochs_done = start_epoch_;
    RunSegment seg;
    seg.number = static_cast<std::int64_t>(record->segments.size()) + 1;
    seg.start = utc_now();
    seg.world_size = comm_.size();
    seg.config_hash = record->config_hash;
    seg.resumed_from = start.snapshot.string();
    seg.start_epoch = start_epoch_;
    seg.start_step = start_step_;
    seg.config_changes = start.changes;
    seg.epochs_done = start_epoch_;
    record->segments.push_back(seg);
    segment_ = seg.number;
    ckpt::write_file_atomically(std::filesystem::path(cfg_.run.dir) / kResolvedConfigFile,
                                cfg_.resolved_toml);
    write_record(&*record);
  }
  try {
    auto result = train_run(record ? &*record : nullptr);
    if (trace_) trace_->finish(out_);
    if (record) {
      record->status = result.stopped ? "stopped" : "complete";
      record->segments.back().exit =
          result.stopped ? (runtime::stop_signal() != 0
                                ? std::string("stopped by ") + strsignal(runtime::stop_signal())
                                : std::string("stopped: another rank got a stop signal"))
                         : "complete";
      record->segments.back().end = utc_now();
      write_record(&*record);
    }
    return result;
  } catch (const std::exception& e) {
    if (record) try {
        record->status = "failed";
        record->segments.back().exit = std::string("failed: ") + e.what();
        record->segments.back().end = utc_now();
        write_record(&*record);
      } catch (const std::exception&) {
        // The training error is the one to report.
      }
    throw;
  }
}

TrainResult Trainer::train_run(RunRecord* record) {
  const bool root = comm_.rank() == 0;
  std::unique_ptr<MetricsLog> log;
  // metrics.jsonl restarts from the snapshot's rows: rows written after it (by a segment that was
  // killed) are trained again and must not appear twice.
  if (root) log = std::make_unique<MetricsLog>(cfg_.run.dir, history_);
  if (root && cfg_.run.tensorboard)
    tensorboard_ = std::make_unique<TensorBoardWriter>(
        std::filesystem::path(cfg_.run.dir) / "tensorboard", global_step_);
  if (root)
    progress_log_ = std::make_unique<ProgressLog>(
        out_, !runtime::stdout_is_terminal(), cfg_.run.log_every,
        global_step_ + (cfg_.train.epochs - start_epoch_) * steps_per_epoch_ - start_step_,
        global_step_, samples_seen_);
  if (cfg_.run.trace) {
    trace_ = std::make_unique<Trace>(cfg_.run.dir, comm_);
    sync_->set_timing(true);
  }
  // Resident memory per rank, private vs shared: shows that data.distribute = "broadcast" holds the
  // dataset once per node.
  const auto w = static_cast<std::size_t>(comm_.size());
  std::vector<std::int64_t> mem(2 * w, 0);
  mem[2 * static_cast<std::size_t>(comm_.rank())] = proc_status_kib("RssAnon");
  mem[2 * static_cast<std::size_t>(comm_.rank()) + 1] = proc_status_kib("RssShmem");
  if (w > 1) comm_.allreduce_sum(std::span<std::int64_t>(mem));
  out_ << "memory (MiB resident, private/shared):";
  for (std::size_t r = 0; r < w; ++r)
    out_ << " rank " << r << " " << mem[2 * r] / 1024 << "/" << mem[2 * r + 1] / 1024
         << (r + 1 < w ? "," : "\n");
  out_ << "model:\n" << model_->summary() << "\n";
  out_ << "data: " << train_set().size() << " training / " << test_set().size()
       << " test samples of " << model_->input_shape()[0] << "x" << model_->input_shape()[1] << "x"
       << model_->input_shape()[2] << ", " << train_set().num_classes() << " classes; "
       << steps_per_epoch_ << " steps per epoch, global batch " << global_batch_ << " (";
  // The slices the first epoch trains (a resume may bring the snapshot's, applied at its start).
  const auto& slices = pending_shares_.empty() ? shares_ : pending_shares_;
  if (std::adjacent_find(slices.begin(), slices.end(), std::not_equal_to<>()) == slices.end())
    out_ << comm_.size() << " rank(s) x " << slices.front();
  else
    out_ << "rank shares " << join(slices, " + ");
  if (cfg_.train.accumulate > 1) out_ << " in " << cfg_.train.accumulate << " micro-batches";
  if (std::any_of(caps_.begin(), caps_.end(), [](std::int64_t c) { return c > 0; }))
    out_ << "; micro-batches of at most " << join(caps_, ", ") << " sample(s)";
  out_ << ")\n";
  out_ << data_note_ << data::describe_transforms(cfg_.data, norm_);
  out_ << "run: " << run_id_ << ", segment " << segment_ << ", in " << cfg_.run.dir << "\n";
  out_.flush();

  TrainResult result;
  segment_t0_ = Clock::now();
  auto run_time = [&] { return run_train_s_ + seconds_since(segment_t0_); };
  for (std::int64_t epoch = start_epoch_; epoch < cfg_.train.epochs; ++epoch) {
    bool stopped = false, stop_after = false;
    const std::int64_t first_step = epoch == start_epoch_ ? start_step_ : 0;
    EpochMetrics m = train_epoch(epoch, first_step, stopped, stop_after);
    if (stopped) {
      out_ << "stop requested (a SIGTERM/SIGUSR1 reached at least one rank): saving epoch "
           << epoch + 1 << " at step " << last_step_ << "\n";
      save(epoch, last_step_);
      result.stopped = true;
      result.last = m;
      result.total_s = run_time();
      return result;
    }
    const bool last = epoch + 1 == cfg_.train.epochs;
    if (last || (cfg_.train.eval_every > 0 && (epoch + 1) % cfg_.train.eval_every == 0)) {
      const auto te = Clock::now();
      const TraceSpan traced(trace_.get(), "evaluate", global_step_);
      const EvalResult e = evaluate();
      m.eval_s = seconds_since(te);
      m.evaluated = true;
      m.test_loss = e.loss;
      m.test_acc = e.accuracy;
      m.test_samples = e.samples;
      m.confusion = e.confusion;
      m.class_names = class_names_;
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
    // rank_shares = auto: every rank decides from the same gathered table, so all take the same
    // shares, from the next epoch on (and into the snapshot written below).
    if (auto_shares && !last) {
      // Every rank decides from the same gathered bytes; rank 0's decision is still the one taken,
      // so that ranks built by different compilers (pooled workstations) cannot disagree on a
      // near-tie and train overlapping slices. decided = {1, shares...} or {0, ...}: none.
      std::vector<std::int64_t> decided(static_cast<std::size_t>(comm_.size()) + 1, 0);
      if (const auto mine = rebalanced_shares(m.ranks, cfg_.train.rebalance_threshold)) {
        decided[0] = 1;
        std::copy(mine->begin(), mine->end(), decided.begin() + 1);
      }
      if (comm_.size() > 1)
        comm_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(decided)), 0);
      const std::vector<std::int64_t> next_shares(decided.begin() + 1, decided.end());
      const auto* next = decided[0] == 1 ? &next_shares : nullptr;
      // Every micro-batch of train.accumulate needs a sample: shares below that are not taken.
      if (next && *std::min_element(next->begin(), next->end()) >= cfg_.train.accumulate) {
        set_rank_shares(*next);
        out_ << "rank_shares = auto: " << shares_text(*next) << " samples per rank from epoch "
             << epoch + 2 << " (predicted step "
             << format_ms(predicted_step_s(*next, per_sample_times(m.ranks))) << " instead of "
             << format_ms(predicted_step_s(rank_shares(), per_sample_times(m.ranks))) << ")\n";
      }
    }
    if (scaler_.enabled()) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "loss scale %g, %lld overflowing step(s) skipped so far\n",
                    scaler_.scale(), static_cast<long long>(scaler_.skipped()));
      out_ << buf;
    }
    out_.flush();
    history_ += to_json(m) + "\n";
    if (log) log->write_epoch(m);
    if (tensorboard_) tensorboard_->epoch(global_step_, m);
    if (trace_) trace_->flush();
    result.last = m;
    const bool save_due = cfg_.train.save_every > 0 && (epoch + 1) % cfg_.train.save_every == 0;
    // The summary goes out before the final snapshot: a run killed in between retrains its last
    // epoch from the previous snapshot (the summary row is dropped with the rows after it), and a
    // final snapshot is never without its summary.
    if (last) {
      result.total_s = run_time();
      if (log) log->write_summary(m, result.total_s, comm_.size(), model_->digest(), segment_);
    }
    if (last || save_due || stop_after) save(epoch + 1, 0);
    if (record) {
      record->epochs_done = epoch + 1;
      record->segments.back().epochs_done = epoch + 1;
      write_record(record);
    }
    if (stop_after && !last) {
      out_ << "stop requested (a SIGTERM/SIGUSR1 reached at least one rank) with the epoch's last "
              "step: saved epoch "
           << epoch + 1 << "\n";
      result.stopped = true;
      result.total_s = run_time();
      return result;
    }
  }
  if (start_epoch_ >= cfg_.train.epochs)
    throw Error("internal: nothing left to train (plan_run_start decides that before)");
  const std::uint64_t digest = model_->digest();
  char buf[160];
  std::snprintf(
      buf, sizeof buf,
      "final test accuracy: %.2f%% (%lld samples), test loss %.4f, weights digest %016llx\n",
      100.0 * result.last.test_acc, static_cast<long long>(result.last.test_samples),
      result.last.test_loss, static_cast<unsigned long long>(digest));
  out_ << buf;
  out_.flush();
  return result;
}

}  // namespace ddp::train
