#include "ddp/sync/gradient_sync.hpp"

#include <chrono>

namespace ddp::sync {

std::vector<Bucket> plan_buckets(const nn::Model& model, std::size_t cap_bytes,
                                 std::size_t first_cap_bytes) {
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (std::size_t i = model.num_layers(); i-- > 0;) {
    const auto [b, e] = model.grad_range(i);
    if (e == 0) continue;
    if (!open) {
      cur = Bucket{b, e, i, i};
      open = true;
    } else {
      // Layers sit in forward order in the flat buffer, so going down the layers extends the
      // bucket's range downwards and it stays contiguous.
      cur.begin = b;
      cur.lowest_layer = i;
    }
    const std::size_t cap = out.empty() ? first_cap_bytes : cap_bytes;
    if ((cur.end - cur.begin) * sizeof(float) >= cap) {
      out.push_back(cur);
      open = false;
    }
  }
  if (open) out.push_back(cur);
  return out;
}

GradientSync::GradientSync(nn::Model& model, comm::Communicator& comm, std::size_t cap_bytes,
                           std::size_t first_cap_bytes)
    : model_(model), comm_(comm), buckets_(plan_buckets(model, cap_bytes, first_cap_bytes)) {
  requests_.resize(buckets_.size());
  done_.assign(buckets_.size(), false);
}

void GradientSync::begin(std::span<const float> accumulated) {
  accumulated_ = accumulated;
  next_ = 0;
  done_.assign(buckets_.size(), false);
}

void GradientSync::launch(std::size_t i) {
  const Bucket& b = buckets_[i];
  auto grads = model_.grads().subspan(b.begin, b.end - b.begin);
  // The backend adds: on a GPU both buffers are device memory, and the add is enqueued before the
  // all-reduce that reads it.
  if (!accumulated_.empty())
    model_.backend().add(static_cast<std::int64_t>(grads.size()), accumulated_.data() + b.begin,
                         grads.data());
  requests_[i] = comm_.iallreduce_sum(grads);
  ++stats_.buckets_launched;
}

void GradientSync::progress() {
  // Open MPI progresses non-blocking collectives only inside MPI calls: test the oldest pending
  // one.
  for (std::size_t i = 0; i < next_; ++i) {
    if (done_[i]) continue;
    done_[i] = comm_.test(requests_[i]);
    break;
  }
}

void GradientSync::on_layer_done(std::size_t layer) {
  while (next_ < buckets_.size() && layer <= buckets_[next_].lowest_layer) launch(next_++);
  progress();
}

void GradientSync::finish() {
  while (next_ < buckets_.size()) launch(next_++);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (!done_[i]) {
      comm_.wait(requests_[i]);
      done_[i] = true;
    }
  stats_.exposed_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ddp::sync
