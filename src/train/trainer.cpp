#include "ddp/train/trainer.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/data/loader.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"
#include "ddp/runtime/runtime.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

data::Normalization make_normalization(const app::DataConfig& d, const data::Dataset& train) {
  const auto c = static_cast<std::size_t>(train.channels());
  if (d.normalize == "dataset") return data::compute_normalization(train);
  data::Normalization n;
  if (d.normalize == "none") {
    n.mean.assign(c, 0.0f);
    n.std.assign(c, 1.0f);
    return n;
  }
  auto expand = [&](const std::vector<double>& v, const char* key) {
    if (v.size() != 1 && v.size() != c)
      throw ConfigError(std::string("data.") + key + " has " + std::to_string(v.size()) +
                        " values but the dataset has " + std::to_string(c) +
                        " channels: give 1 value or " + std::to_string(c));
    std::vector<float> out(c);
    for (std::size_t i = 0; i < c; ++i) out[i] = static_cast<float>(v[v.size() == 1 ? 0 : i]);
    return out;
  };
  n.mean = expand(d.mean, "mean");
  n.std = expand(d.std, "std");
  return n;
}

}  // namespace

Trainer::Trainer(const app::Config& cfg, comm::Communicator& comm, std::ostream& out)
    : cfg_(cfg), comm_(comm), out_(out), be_(backend::make_cpu_backend()) {
  const auto& d = cfg_.data;
  train_ = data::read_dataset(d.dataset, d.root, data::Split::train);
  test_ = data::read_dataset(d.dataset, d.root, data::Split::test);
  if (d.train_limit > 0 && d.train_limit < train_.size()) train_ = train_.head(d.train_limit);
  if (d.test_limit > 0 && d.test_limit < test_.size()) test_ = test_.head(d.test_limit);
  norm_ = make_normalization(d, train_);

  const Shape input{train_.channels(), train_.height(), train_.width()};
  model_ = std::make_unique<nn::Model>(cfg_.model.layers, input, train_.num_classes(), *be_);
  model_->init_parameters(cfg_.train.seed);
  // Every replica starts from rank 0's weights (identical already by seed; this makes it a fact).
  if (comm_.size() > 1) {
    auto p = model_->params();
    comm_.broadcast(std::as_writable_bytes(p), 0);
    auto b = model_->buffers();
    comm_.broadcast(std::as_writable_bytes(b), 0);
  }
  const std::int64_t batch = cfg_.train.batch_size;
  model_->reserve(batch);
  dlogits_ = Tensor::zeros(Shape{batch, train_.num_classes()});
  opt_ = optim::Optimizer::create(cfg_.optim, *be_, model_->params().size());

  data::SamplerOptions so;
  so.dataset_size = train_.size();
  so.global_batch = batch * comm_.size();
  so.world_size = comm_.size();
  so.rank = comm_.rank();
  so.drop_last = cfg_.train.drop_last;
  so.seed = cfg_.train.seed;
  steps_per_epoch_ = data::steps_per_epoch(so);
  if (steps_per_epoch_ == 0)
    throw ConfigError("train.batch_size = " + std::to_string(batch) + " with drop_last leaves no "
                      "step: the training set has only " + std::to_string(train_.size()) +
                      " samples");
  sched_ = std::make_unique<optim::LrSchedule>(cfg_.schedule, cfg_.optim.lr, steps_per_epoch_,
                                               cfg_.train.epochs);
}

Trainer::~Trainer() = default;

EpochMetrics Trainer::train_epoch(std::int64_t epoch) {
  const std::int64_t batch = cfg_.train.batch_size;
  data::SamplerOptions so;
  so.dataset_size = train_.size();
  so.global_batch = batch * comm_.size();
  so.world_size = comm_.size();
  so.rank = comm_.rank();
  so.shuffle = cfg_.train.shuffle;
  so.drop_last = cfg_.train.drop_last;
  so.seed = cfg_.train.seed;
  auto batches = data::epoch_batches(so, static_cast<std::uint64_t>(epoch));

  data::Augmentation aug;
  aug.random_crop = cfg_.data.augment;
  aug.hflip = cfg_.data.augment;
  aug.crop_padding = static_cast<int>(cfg_.data.crop_padding);
  data::BatchLoader loader(train_, norm_, aug, cfg_.train.seed, batch, cfg_.data.prefetch);
  loader.start(std::move(batches), static_cast<std::uint64_t>(epoch));

  const Shape input = model_->input_shape();
  const std::int64_t classes = model_->num_classes();
  auto params = model_->params();
  auto grads = model_->grads();
  ProgressBar bar(comm_.rank() == 0 && runtime::stdout_is_terminal(), epoch + 1, cfg_.train.epochs,
                  steps_per_epoch_);

  double loss_sum = 0.0;
  std::int64_t correct = 0, seen = 0, global_seen = 0, step = 0;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch));
  double lr = 0.0;
  const auto t0 = Clock::now();
  while (auto b = loader.next()) {
    lr = sched_->at(global_step_);
    if (b->size > 0) {
      nn::StepContext ctx{nn::Mode::train,
                          hash_words(cfg_.train.seed, static_cast<std::uint64_t>(RngStream::dropout),
                                     static_cast<std::uint64_t>(global_step_)),
                          nullptr};
      // Dropout masks are keyed by epoch-order position, which is the same whatever the split.
      for (std::int64_t i = 0; i < b->size; ++i)
        ids[static_cast<std::size_t>(i)] = b->global_offset + i;
      ctx.sample_ids = ids.data();
      const Tensor x = Tensor::view(const_cast<float*>(b->images), input.with_batch(b->size));
      const Tensor& logits = model_->forward(x, ctx);
      const Tensor dl = dlogits_.first(b->size);
      // The gradient of the global batch's mean loss: every rank scales by the global size, and
      // the all-reduce sums - exact also for a short last batch split unevenly.
      const auto r = be_->softmax_xent(b->size, classes, logits.data(), b->labels,
                                       static_cast<float>(cfg_.train.label_smoothing),
                                       1.0f / static_cast<float>(b->global_size), dl.data());
      model_->backward(dl);
      loss_sum += r.loss_sum;
      correct += r.correct;
    } else {
      be_->fill(static_cast<std::int64_t>(grads.size()), 0.0f, grads.data());
    }
    if (comm_.size() > 1) comm_.allreduce_sum(grads);
    opt_->step(params, grads, lr);
    ++global_step_;
    ++step;
    seen += b->size;
    global_seen += b->global_size;
    if (step % 10 == 0 || step == steps_per_epoch_)
      bar.update(step, seen > 0 ? loss_sum / static_cast<double>(seen) : 0.0,
                 static_cast<double>(global_seen) / seconds_since(t0));
  }
  const double train_s = seconds_since(t0);
  bar.clear();

  double sums[2] = {loss_sum, 0.0};
  std::int64_t counts[2] = {correct, seen};
  if (comm_.size() > 1) {
    comm_.allreduce_sum(std::span<double>(sums, 1));
    comm_.allreduce_sum(std::span<std::int64_t>(counts, 2));
  }
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.epochs = cfg_.train.epochs;
  m.steps = step;
  m.train_loss = counts[1] > 0 ? sums[0] / static_cast<double>(counts[1]) : 0.0;
  m.train_acc = counts[1] > 0 ? static_cast<double>(counts[0]) / static_cast<double>(counts[1]) : 0;
  m.lr = lr;
  m.epoch_s = train_s;
  m.images_per_s = train_s > 0 ? static_cast<double>(global_seen) / train_s : 0.0;
  return m;
}

EvalResult Trainer::evaluate() {
  // Each rank takes a contiguous slice of the test set; no padding, so every sample counts once.
  const std::int64_t n = test_.size(), w = comm_.size(), r = comm_.rank();
  const std::int64_t begin = n * r / w, end = n * (r + 1) / w;
  const std::int64_t batch = cfg_.train.batch_size;
  std::vector<data::RankBatch> batches;
  for (std::int64_t i = begin; i < end; i += batch) {
    data::RankBatch rb;
    for (std::int64_t j = i; j < std::min(end, i + batch); ++j) rb.indices.push_back(j);
    rb.global_size = static_cast<std::int64_t>(rb.indices.size());
    rb.global_offset = i;
    batches.push_back(std::move(rb));
  }
  data::BatchLoader loader(test_, norm_, data::Augmentation{}, cfg_.train.seed, batch,
                           cfg_.data.prefetch);
  loader.start(std::move(batches), 0);
  const Shape input = model_->input_shape();
  double loss = 0.0;
  std::int64_t counts[2] = {0, 0};  // correct, samples
  while (auto b = loader.next()) {
    const Tensor x = Tensor::view(const_cast<float*>(b->images), input.with_batch(b->size));
    const Tensor& logits = model_->forward(x, nn::StepContext{nn::Mode::eval, 0, nullptr});
    const auto res = be_->softmax_xent(b->size, model_->num_classes(), logits.data(), b->labels,
                                       0.0f, 0.0f, nullptr);
    loss += res.loss_sum;
    counts[0] += res.correct;
    counts[1] += b->size;
  }
  if (comm_.size() > 1) {
    comm_.allreduce_sum(std::span<double>(&loss, 1));
    comm_.allreduce_sum(std::span<std::int64_t>(counts, 2));
  }
  EvalResult e;
  e.samples = counts[1];
  if (e.samples > 0) {
    e.loss = loss / static_cast<double>(e.samples);
    e.accuracy = static_cast<double>(counts[0]) / static_cast<double>(e.samples);
  }
  return e;
}

TrainResult Trainer::run() {
  const bool root = comm_.rank() == 0;
  std::unique_ptr<MetricsLog> log;
  if (root) {
    std::filesystem::create_directories(cfg_.run.dir);
    log = std::make_unique<MetricsLog>(cfg_.run.dir, false);
  }
  out_ << "model:\n" << model_->summary() << "\n";
  out_ << "data: " << train_.size() << " training / " << test_.size() << " test samples of "
       << train_.channels() << "x" << train_.height() << "x" << train_.width() << ", "
       << train_.num_classes() << " classes; " << steps_per_epoch_ << " steps per epoch, global batch "
       << cfg_.train.batch_size * comm_.size() << " (" << comm_.size() << " x "
       << cfg_.train.batch_size << ")\n";
  out_.flush();

  TrainResult result;
  const auto t0 = Clock::now();
  for (std::int64_t epoch = 0; epoch < cfg_.train.epochs; ++epoch) {
    EpochMetrics m = train_epoch(epoch);
    const bool last = epoch + 1 == cfg_.train.epochs;
    if (last || (cfg_.train.eval_every > 0 && (epoch + 1) % cfg_.train.eval_every == 0)) {
      const auto te = Clock::now();
      const EvalResult e = evaluate();
      m.eval_s = seconds_since(te);
      m.evaluated = true;
      m.test_loss = e.loss;
      m.test_acc = e.accuracy;
      m.test_samples = e.samples;
    }
    out_ << format_epoch_line(m) << "\n";
    out_.flush();
    if (log) log->write_epoch(m);
    result.last = m;
  }
  result.total_s = seconds_since(t0);
  const std::uint64_t digest = model_->digest();
  if (log) log->write_summary(result.last, result.total_s, comm_.size(), digest);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "final test accuracy: %.2f%% (%lld samples), loss %.4f, weights digest %016llx\n",
                100.0 * result.last.test_acc, static_cast<long long>(result.last.test_samples),
                result.last.test_loss, static_cast<unsigned long long>(digest));
  out_ << buf;
  out_.flush();
  return result;
}

}  // namespace ddp::train
