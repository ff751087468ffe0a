#include "ddp/train/train_step.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "ddp/backend/device_queue.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

TrainStep::TrainStep(StepParts parts, LossScaler scaler, std::uint64_t seed, int rank,
                     bool batch_stats_synced)
    : p_(parts),
      scaler_(scaler),
      seed_(seed),
      rank_(rank),
      batch_stats_synced_(batch_stats_synced) {
  if (!scaler_.enabled())
    update_ = Update::plain;
  else if (p_.be.host_addressable() || p_.opt.needs_applied_step_count())
    update_ = Update::check_now;
  else
    update_ = Update::check_late;
  if (const char* f = std::getenv("DDP_FAULT_INF_GRAD")) {
    long long r = -1, s = -1;
    if (std::sscanf(f, "%lld:%lld", &r, &s) != 2 || r < 0 || s < 0)
      throw ConfigError(std::string("DDP_FAULT_INF_GRAD = '") + f +
                        "': expected RANK:STEP (test-only fault injection)");
    fault_inf_rank_ = static_cast<int>(r);
    fault_inf_step_ = s;
  }
  if (p_.be.device() != Device::cpu)
    if (auto* q = dynamic_cast<backend::DeviceQueue*>(&p_.be))
      step_timer_ = std::make_unique<DeviceStepTimer>(*q);
}

TrainStep::~TrainStep() = default;

void TrainStep::reserve(std::int64_t micro_batch, std::int64_t rank_batch) {
  const std::int64_t classes = p_.model.num_classes();
  if (dlogits_.empty() || dlogits_.numel() < micro_batch * classes)
    dlogits_ = p_.be.alloc(Shape{micro_batch, classes});
  if (std::ssize(sample_ids_) < rank_batch)
    sample_ids_.resize(static_cast<std::size_t>(rank_batch));
}

double TrainStep::run(const data::Batch& batch, const MicroBatchPlan& plan, BatchFeed& feed,
                      std::int64_t global_step) {
  if (plan.samples != batch.size)
    throw Error("internal: a slice of " + std::to_string(batch.size) + " samples, planned " +
                std::to_string(plan.samples));
  const Timing timing = start_timing();

  // 1. Forward, loss and backward of each micro-batch; the gradient buckets start all-reducing as
  //    the last backward finishes them.
  forward_backward(batch, plan, global_step);

  // 2. The gradients summed over every rank and micro-batch. On a GPU the compute stream waits,
  //    not the host (NCCL in training orders its blocking all-reduce of device memory the same
  //    way, so comm.overlap = false does not make the host wait either).
  if (step_timer_) step_timer_->backward_done();
  {
    const TraceSpan wait(trace_, "gradient wait", global_step);
    p_.sync.finish();
  }
  if (step_timer_) step_timer_->gradients_ready(batch.size);
  // The next batch is staged while the device computes this one (after finish(), which starts
  // the last buckets).
  feed.prefetch();
  end_timing(timing, batch.size, global_step);

  // 3. The learning rate of this step; 4. unscaling with the overflow check, and the optimizer.
  const double lr = p_.schedule.at(global_step);
  update(lr, global_step);
  return lr;
}

TrainStep::Timing TrainStep::start_timing() {
  if (step_timer_) step_timer_->start();
  return {grad_wait_s(), Clock::now()};
}

void TrainStep::end_timing(const Timing& t, std::int64_t samples, std::int64_t global_step) {
  if (trace_)
    for (const auto& b : p_.sync.bucket_times())
      trace_->all_reduce(b.bucket, b.start, b.end, global_step);
  // Rank speed: the step's forward + backward is its time less its wait for the gradients. On a
  // GPU both are timed on the device and read once it has passed them (device_step_timer.hpp).
  if (step_timer_) {
    collect_step_times(false);
  } else {
    const double wait = grad_wait_s() - t.wait_before;
    step_meter_.add_step(seconds_since(t.start) - wait, wait, samples);
  }
}

void TrainStep::forward_backward(const data::Batch& batch, const MicroBatchPlan& plan,
                                 std::int64_t global_step) {
  const Shape input = p_.model.input_shape();
  const std::int64_t per_sample = input.numel();
  auto grads = p_.model.grads();
  nn::StepContext ctx{nn::Mode::train,
                      hash_words(seed_, static_cast<std::uint64_t>(RngStream::dropout),
                                 static_cast<std::uint64_t>(global_step)),
                      sample_ids_.data()};
  // Dropout masks are keyed by epoch-order position: the same whatever the split over ranks.
  for (std::int64_t i = 0; i < batch.size; ++i)
    sample_ids_[static_cast<std::size_t>(i)] = batch.global_offset + i;

  p_.sync.begin(plan.total);
  for (std::int64_t m = 0; m < plan.total; ++m) {
    const auto [b, e] = plan.range(m);
    const std::int64_t len = e - b;
    if (len == 0) {
      // No samples here: a zero gradient, and sync batch norm's collectives joined (the other
      // ranks' forward and backward make them, in order).
      p_.be.fill(static_cast<std::int64_t>(grads.size()), 0.0f, grads.data());
      if (batch_stats_synced_) p_.model.step_without_samples(p_.sync.hook());
    } else {
      // Compute (forward + backward) of micro-batch m starts here.
      ctx.sample_ids = sample_ids_.data() + b;
      std::optional<TraceSpan> phase(std::in_place, trace_, "forward", global_step);
      const Tensor x = Tensor::view(const_cast<float*>(batch.images + b * per_sample),
                                    input.with_batch(len), p_.be.device());
      const Tensor& logits = p_.model.forward(x, ctx);
      const Tensor dl = dlogits_.first(len);
      // Gradient of the global batch's mean loss: scale by the global size; the all-reduce sums.
      // Times the loss scale, which update() divides out again.
      p_.loss.forward_backward(logits, batch.labels + b,
                               scaler_.scale() / static_cast<double>(batch.global_size), dl);
      if (m == 0 && rank_ == fault_inf_rank_ && global_step == fault_inf_step_) {
        std::fprintf(stderr,
                     "ddp_train: fault injection (DDP_FAULT_INF_GRAD, test only): rank %d "
                     "overflows its gradient at step %lld\n",
                     rank_, static_cast<long long>(global_step));
        // An inf in the loss gradient that backward spreads into the parameter gradients.
        p_.be.fill(1, std::numeric_limits<float>::infinity(), dl.data());
      }
      // The hook starts bucket all-reduces during the last micro-batch; it never waits.
      phase.emplace(trace_, "backward", global_step);
      p_.model.backward(dl, p_.sync.hook());
      // Compute of micro-batch m ends here.
    }
    p_.sync.after_micro_batch();
  }
}

void TrainStep::update(double lr, std::int64_t global_step) {
  const TraceSpan optimizer(trace_, "optimizer", global_step);
  auto params = p_.model.params();
  auto grads = p_.model.grads();
  const auto count = static_cast<std::int64_t>(grads.size());
  // With loss scaling the all-reduced gradients are unscaled and checked; an overflow on any rank
  // is in every rank's sum, so all ranks skip the same steps.
  const auto inv_scale = static_cast<float>(1.0 / scaler_.scale());
  switch (update_) {
    case Update::plain:
      p_.opt.step(params, grads, lr);
      break;
    case Update::check_now:
      if (scaler_.update(p_.be.unscale_check(count, grads.data(), inv_scale)))
        p_.opt.step(params, grads, lr);
      break;
    case Update::check_late: {
      const int slot = static_cast<int>(global_step % backend::Backend::kOverflowSlots);
      p_.opt.step(params, grads, lr, p_.be.unscale_flag(count, grads.data(), inv_scale, slot));
      overflow_pending_.push_back({slot, scaler_.scale()});
      settle_overflow(1);
      break;
    }
  }
}

void TrainStep::settle_overflow(std::size_t keep) {
  while (overflow_pending_.size() > keep) {
    const auto [slot, scale] = overflow_pending_.front();
    overflow_pending_.pop_front();
    const bool overflow = p_.be.overflow_seen(slot);
    scaler_.update_late(!overflow, scale);
    if (overflow) p_.opt.step_was_skipped();
  }
}

double TrainStep::grad_wait_s() const {
  return step_timer_ ? device_wait_s_ : p_.sync.stats().exposed_s;
}

void TrainStep::collect_step_times(bool wait_for_all) {
  if (!step_timer_) return;
  for (const auto& t : step_timer_->collect(wait_for_all)) {
    step_meter_.add_step(t.compute_s, t.wait_s, t.samples);
    device_wait_s_ += t.wait_s;
  }
}

}  // namespace ddp::train
