#include "ddp/train/chunk_step.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/sync/exact_allreduce.hpp"

namespace ddp::train {

// One chunk's model, thread and job.
struct ChunkStep::Replica {
  std::int64_t index = 0;
  std::unique_ptr<backend::Backend> be;  // its own: a backend keeps per-call state (the loss sums)
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss;
  std::unique_ptr<nn::BatchStatsReducer> meeting;  // sync batch norm
  Tensor dlogits;
  std::vector<std::int64_t> ids;  // the chunk's samples' positions in the epoch (dropout masks)
  std::thread thread;
  // The job, written by the main thread before it bumps `job` (under mu_).
  std::uint64_t job = 0;
  const float* images = nullptr;
  const std::int32_t* labels = nullptr;
  std::int64_t n = 0, first_id = 0, chunk_id = 0;
  double grad_scale = 0.0;
  std::uint64_t seed = 0;
  bool inject_inf = false;
  // Written by the chunk's thread.
  std::atomic<std::size_t> lowest_done{std::numeric_limits<std::size_t>::max()};
  bool holds_token = false;
  nn::LossSums loss_sums;
  std::exception_ptr error;
  std::span<double> deposit;  // sync batch norm: the statistics brought to the meeting
};

// Sync batch norm inside a chunk: the chunk's per-channel sums go to a meeting of all this rank's
// chunks, where the main thread sums them exactly with every other rank's; the chunk gives its
// compute thread up while it waits.
class ChunkStep::Rendezvous final : public nn::BatchStatsReducer {
 public:
  Rendezvous(ChunkStep& step, Replica& r) : s_(step), r_(r) {}
  void allreduce_sum(std::span<double> data) override {
    s_.tokens_.release();
    r_.holds_token = false;
    {
      std::unique_lock lk(s_.mu_);
      if (s_.failed_) throw Error("internal: a batch-norm meeting after another chunk failed");
      r_.deposit = data;
      ++s_.arrived_;
      const std::uint64_t m = s_.meeting_;
      s_.main_cv_.notify_one();
      s_.work_cv_.wait(lk, [&] { return s_.meeting_ != m || s_.failed_ || s_.stop_; });
      if (s_.meeting_ == m) throw Error("internal: a batch-norm meeting was abandoned");
    }
    s_.tokens_.acquire();
    r_.holds_token = true;
  }

 private:
  ChunkStep& s_;
  Replica& r_;
};

namespace {

// A rank without chunks in a step: its part of sync batch norm's sums is nothing, but it makes
// the collectives (through the trainer's model, Model::step_without_samples).
class IdleReducer final : public nn::BatchStatsReducer {
 public:
  IdleReducer(comm::Communicator& comm, const std::int64_t& terms) : comm_(comm), terms_(terms) {}
  void allreduce_sum(std::span<double> data) override {
    sync::exact_allreduce(comm_, {}, {}, terms_, data);
  }

 private:
  comm::Communicator& comm_;
  const std::int64_t& terms_;
};

}  // namespace

ChunkStep::ChunkStep(nn::Model& model, comm::Communicator& comm, const ChunkStepOptions& options)
    : model_(model),
      comm_(comm),
      options_(options),
      sum_(model, comm, options.buckets),
      tokens_(std::max(1, options.threads)) {
  if (!options_.layers) throw Error("internal: a chunk step without the model's layers");
  if (!model_.backend().host_addressable())
    throw Error("internal: reproducible chunks run on the CPU backend only");
  if (options_.sync_batchnorm) {
    idle_reducer_ = std::make_unique<IdleReducer>(comm_, terms_);
    model_.set_batch_stats_reducer(idle_reducer_.get());
  }
}

ChunkStep::~ChunkStep() {
  {
    const std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& r : replicas_)
    if (r->thread.joinable()) r->thread.join();
}

void ChunkStep::ensure_replicas(std::int64_t n) {
  while (std::ssize(replicas_) < n) {
    auto r = std::make_unique<Replica>();
    r->index = std::ssize(replicas_);
    r->be = backend::make_cpu_backend();
    r->model = std::make_unique<nn::Model>(*options_.layers, model_.input_shape(),
                                           model_.num_classes(), *r->be);
    // The chunk size is the largest batch a replica runs (the short chunk is smaller).
    const std::int64_t most = std::max<std::int64_t>(1, chunk_);
    r->model->reserve(most);
    r->loss = std::make_unique<nn::SoftmaxCrossEntropy>(*r->be, model_.num_classes(),
                                                        options_.label_smoothing);
    r->dlogits = r->be->alloc(Shape{most, model_.num_classes()});
    r->ids.resize(static_cast<std::size_t>(most));
    if (options_.sync_batchnorm) {
      r->meeting = std::make_unique<Rendezvous>(*this, *r);
      r->model->set_batch_stats_reducer(r->meeting.get());
    }
    Replica& ref = *r;
    replicas_.push_back(std::move(r));
    ref.thread = std::thread([this, &ref] { worker(ref); });
  }
}

void ChunkStep::worker(Replica& r) {
  backend::use_one_compute_thread_here();
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || r.job != seen; });
      if (stop_) return;
      seen = r.job;
    }
    try {
      tokens_.acquire();
      r.holds_token = true;
      compute(r);
    } catch (...) {
      r.error = std::current_exception();
    }
    if (r.holds_token) {
      tokens_.release();
      r.holds_token = false;
    }
    {
      const std::lock_guard lk(mu_);
      ++done_;
    }
    main_cv_.notify_one();
  }
}

void ChunkStep::compute(Replica& r) {
  nn::Model& m = *r.model;
  // The step's weights and running statistics (the trainer's model does not change meanwhile).
  const auto src_p = model_.params();
  const auto src_b = model_.buffers();
  std::copy(src_p.begin(), src_p.end(), m.params().begin());
  std::copy(src_b.begin(), src_b.end(), m.buffers().begin());
  for (std::int64_t i = 0; i < r.n; ++i) r.ids[static_cast<std::size_t>(i)] = r.first_id + i;
  const nn::StepContext ctx{nn::Mode::train, r.seed, r.ids.data()};
  const Tensor x = Tensor::view(const_cast<float*>(r.images), m.input_shape().with_batch(r.n));
  const Tensor& logits = m.forward(x, ctx);
  const Tensor dl = r.dlogits.first(r.n);
  r.loss->forward_backward(logits, r.labels, r.grad_scale, dl);
  if (r.inject_inf) dl.data()[0] = std::numeric_limits<float>::infinity();
  const bool notify = comm_.size() > 1 && options_.buckets.overlap && !options_.sync_batchnorm;
  m.backward(dl, [&](std::size_t layer) {
    r.lowest_done.store(layer, std::memory_order_release);
    if (notify) main_cv_.notify_one();
  });
  r.lowest_done.store(0, std::memory_order_release);
  r.loss_sums = r.loss->take();
}

std::size_t ChunkStep::layers_done() const {
  // The chunk furthest behind decides (a chunk not started yet: SIZE_MAX). None: nothing holds
  // the buckets back.
  std::size_t behind = 0;
  for (std::int64_t m = 0; m < active_; ++m)
    behind = std::max(behind, replicas_[static_cast<std::size_t>(m)]->lowest_done.load(
                                  std::memory_order_acquire));
  return behind;
}

void ChunkStep::meet() {
  std::vector<std::span<const double>> parts;
  std::vector<std::int64_t> ids;
  for (std::int64_t m = 0; m < active_; ++m) {
    const Replica& r = *replicas_[static_cast<std::size_t>(m)];
    parts.push_back(r.deposit);
    ids.push_back(r.chunk_id);
  }
  // Every chunk brought the same layer's sums; the sum goes back to each.
  const std::span<double> out = replicas_[0]->deposit;
  sync::exact_allreduce(comm_, parts, ids, terms_, out);
  for (std::int64_t m = 1; m < active_; ++m) {
    const auto d = replicas_[static_cast<std::size_t>(m)]->deposit;
    std::copy(out.begin(), out.end(), d.begin());
  }
  {
    const std::lock_guard lk(mu_);
    arrived_ = 0;
    ++meeting_;
  }
  work_cv_.notify_all();
}

ChunkStep::Result ChunkStep::run(const data::Batch& batch, const MicroBatchPlan& plan,
                                 double grad_scale, std::uint64_t dropout_seed, bool inject_inf) {
  if (plan.chunk < 1 || plan.samples != batch.size)
    throw Error("internal: a chunk step for a plan of " + std::to_string(plan.samples) +
                " samples in chunks of " + std::to_string(plan.chunk) + ", batch of " +
                std::to_string(batch.size));
  chunk_ = plan.chunk;
  const std::int64_t k = plan.chunks.count;
  ensure_replicas(k);
  terms_ = plan.chunks.total;
  const std::int64_t per_sample = model_.input_shape().numel();
  std::vector<std::span<const float>> parts;
  std::vector<std::int64_t> ids;
  for (std::int64_t m = 0; m < k; ++m) {
    Replica& r = *replicas_[static_cast<std::size_t>(m)];
    const auto [b, e] = chunk_in_slice(plan.chunks, plan.chunk, m);
    r.images = batch.images + b * per_sample;
    r.labels = batch.labels + b;
    r.n = e - b;
    r.first_id = batch.global_offset + b;
    r.chunk_id = plan.chunks.first + m;
    r.grad_scale = grad_scale;
    r.seed = dropout_seed;
    r.inject_inf = inject_inf && m == 0;
    r.lowest_done.store(std::numeric_limits<std::size_t>::max());
    r.error = nullptr;
    parts.push_back(r.model->grads());
    ids.push_back(r.chunk_id);
  }
  sum_.begin(std::move(parts), std::move(ids), terms_);
  {
    const std::lock_guard lk(mu_);
    active_ = k;
    done_ = 0;
    arrived_ = 0;
    failed_ = false;
    for (std::int64_t m = 0; m < k; ++m) ++replicas_[static_cast<std::size_t>(m)]->job;
  }
  work_cv_.notify_all();
  // Without chunks this step, the rank still makes sync batch norm's collectives.
  if (k == 0 && options_.sync_batchnorm) model_.step_without_samples();

  // Coordinate: sync batch norm's meetings, and the gradient buckets as backward completes them.
  const bool poll = comm_.size() > 1 && options_.buckets.overlap && !options_.sync_batchnorm;
  for (;;) {
    std::unique_lock lk(mu_);
    const auto settled = [&] {
      return done_ == active_ || (arrived_ > 0 && arrived_ + done_ == active_);
    };
    if (poll)
      main_cv_.wait_for(lk, std::chrono::milliseconds(1), settled);
    else
      main_cv_.wait(lk, settled);
    if (done_ == active_) break;
    if (arrived_ > 0 && arrived_ + done_ == active_) {
      if (done_ > 0) {  // a chunk failed before the meeting: the others cannot go on
        failed_ = true;
        lk.unlock();
        work_cv_.notify_all();
        continue;
      }
      lk.unlock();
      meet();
      continue;
    }
    lk.unlock();
    sum_.layers_done(layers_done());
  }
  for (std::int64_t m = 0; m < k; ++m)
    if (auto e = replicas_[static_cast<std::size_t>(m)]->error) std::rethrow_exception(e);

  Result out;
  out.nonfinite = sum_.finish(model_.grads());
  combine_buffers_and_loss(k, batch.global_size, out);
  return out;
}

void ChunkStep::combine_buffers_and_loss(std::int64_t chunks, std::int64_t global_size,
                                         Result& out) {
  // Per chunk: its samples x its running statistics (the mean over chunks is weighted by
  // samples), its loss sum and its correct count (a count sums exactly in the fixed point too).
  const std::size_t nb = model_.buffers().size();
  std::vector<std::vector<double>> values(static_cast<std::size_t>(chunks),
                                          std::vector<double>(nb + 2));
  std::vector<std::span<const double>> parts;
  std::vector<std::int64_t> ids;
  for (std::int64_t m = 0; m < chunks; ++m) {
    const Replica& r = *replicas_[static_cast<std::size_t>(m)];
    auto& v = values[static_cast<std::size_t>(m)];
    const auto b = r.model->buffers();
    const auto w = static_cast<double>(r.n);
    for (std::size_t i = 0; i < nb; ++i) v[i] = w * static_cast<double>(b[i]);
    v[nb] = r.loss_sums.loss_sum;
    v[nb + 1] = static_cast<double>(r.loss_sums.correct);
    parts.push_back(v);
    ids.push_back(r.chunk_id);
  }
  std::vector<double> sum(nb + 2);
  sync::exact_allreduce(comm_, parts, ids, terms_, sum);
  const auto dst = model_.buffers();
  const auto g = static_cast<double>(global_size);
  for (std::size_t i = 0; i < nb; ++i) dst[i] = static_cast<float>(sum[i] / g);
  out.loss.loss_sum = sum[nb];
  out.loss.correct = static_cast<std::int64_t>(sum[nb + 1]);
}

}  // namespace ddp::train
