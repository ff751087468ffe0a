#include "ddp/sync/gradient_sync.hpp"

#include <chrono>
#include <string>

#include "ddp/error.hpp"

namespace ddp::sync {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<Bucket> plan_buckets(const nn::Model& model, std::size_t cap_bytes,
                                 std::size_t first_cap_bytes) {
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (std::size_t i = model.num_layers(); i-- > 0;) {
    // Only what trains travels: frozen parameters (train.freeze) are gaps between the ranges.
    const auto& ranges = model.trained_grad_ranges(i);
    for (auto r = ranges.rbegin(); r != ranges.rend(); ++r) {
      const auto [b, e] = *r;
      // Layers sit in forward order in the flat buffer, so going down the layers extends the
      // bucket's range downwards; a frozen gap ends it, so that it stays contiguous.
      if (open && cur.begin != e) {
        out.push_back(cur);
        open = false;
      }
      if (!open) {
        cur = Bucket{b, e, i, i};
        open = true;
      } else {
        cur.begin = b;
        cur.lowest_layer = i;
      }
      const std::size_t cap = out.empty() ? first_cap_bytes : cap_bytes;
      if ((cur.end - cur.begin) * sizeof(float) >= cap) {
        out.push_back(cur);
        open = false;
      }
    }
  }
  if (open) out.push_back(cur);
  return out;
}

GradientSync::GradientSync(nn::Model& model, comm::Communicator& comm, const SyncOptions& options)
    : model_(model),
      comm_(comm),
      options_(options),
      communicates_(comm.size() > 1),
      buckets_(plan_buckets(model, options.cap_bytes, options.first_cap_bytes)) {
  requests_.resize(buckets_.size());
  done_.assign(buckets_.size(), false);
  if (options.max_micro_batches > 1)
    accum_ = model_.backend().alloc(Shape{static_cast<std::int64_t>(model_.grads().size())});
  hook_ = [this](std::size_t layer) { on_layer_done(layer); };
}

void GradientSync::begin(std::int64_t micro_batches) {
  if (micro_batches < 1)
    throw Error("internal: a step of " + std::to_string(micro_batches) + " micro-batches");
  micro_batches_ = micro_batches;
  micro_ = 0;
  next_ = 0;
  done_.assign(buckets_.size(), false);
  if (timing_) times_.clear();
  if (micro_batches > 1) {
    if (accum_.empty())
      accum_ = model_.backend().alloc(Shape{static_cast<std::int64_t>(model_.grads().size())});
    model_.backend().fill(accum_.numel(), 0.0f, accum_.data());
  }
}

std::span<const float> GradientSync::accumulated() const {
  if (micro_batches_ == 1) return {};
  return {accum_.data(), static_cast<std::size_t>(accum_.numel())};
}

void GradientSync::after_micro_batch() {
  if (!last_micro_batch()) {
    auto grads = model_.grads();
    model_.backend().add(accum_.numel(), grads.data(), accum_.data());
  }
  ++micro_;
}

void GradientSync::launch(std::size_t i) {
  const Bucket& b = buckets_[i];
  auto grads = model_.grads().subspan(b.begin, b.end - b.begin);
  // The earlier micro-batches join just before the bucket is sent. The backend adds: on a GPU
  // both buffers are device memory, and the add is enqueued before the all-reduce that reads it.
  if (const auto acc = accumulated(); !acc.empty())
    model_.backend().add(static_cast<std::int64_t>(grads.size()), acc.data() + b.begin,
                         grads.data());
  if (timing_) times_.push_back({i, std::chrono::steady_clock::now(), {}});
  requests_[i] = comm_.iallreduce_sum(grads);
  ++stats_.buckets_launched;
}

void GradientSync::progress() {
  // Open MPI progresses non-blocking collectives only inside MPI calls: test the oldest pending
  // one.
  for (std::size_t i = 0; i < next_; ++i) {
    if (done_[i]) continue;
    done_[i] = comm_.test(requests_[i]);
    if (done_[i] && timing_) times_[i].end = std::chrono::steady_clock::now();
    break;
  }
}

void GradientSync::on_layer_done(std::size_t layer) {
  // Only the last micro-batch's gradients complete a bucket (the others are accumulated).
  if (!communicates_ || !options_.overlap || !last_micro_batch()) return;
  while (next_ < buckets_.size() && layer <= buckets_[next_].lowest_layer) launch(next_++);
  progress();
}

void GradientSync::finish() {
  if (micro_ != micro_batches_)
    throw Error("internal: the step ended after " + std::to_string(micro_) + " of " +
                std::to_string(micro_batches_) + " micro-batches");
  auto grads = model_.grads();
  if (!communicates_ || !options_.overlap) {
    if (const auto acc = accumulated(); !acc.empty())
      model_.backend().add(static_cast<std::int64_t>(grads.size()), acc.data(), grads.data());
    if (communicates_) {
      // Host-timed: the whole wait with MPI; with NCCL in training only the enqueueing (the
      // compute stream waits; the trainer times that on the device, DeviceStepTimer).
      const auto t0 = std::chrono::steady_clock::now();
      if (model_.any_frozen())  // what trains only: the buckets' ranges
        for (const Bucket& b : buckets_)
          comm_.allreduce_sum(grads.subspan(b.begin, b.end - b.begin));
      else
        comm_.allreduce_sum(grads);
      stats_.exposed_s += seconds_since(t0);
      if (timing_) times_.push_back({0, t0, std::chrono::steady_clock::now()});
    }
    return;
  }
  while (next_ < buckets_.size()) launch(next_++);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (!done_[i]) {
      comm_.wait(requests_[i]);
      done_[i] = true;
      if (timing_) times_[i].end = std::chrono::steady_clock::now();
    }
  stats_.exposed_s += seconds_since(t0);
}

}  // namespace ddp::sync
