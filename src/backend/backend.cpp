// The Backend interface's host-memory defaults (what the CPU backend uses as they are).
#include "ddp/backend/backend.hpp"

#include <cstring>

namespace ddp::backend {

Tensor Backend::alloc(Shape shape) {
  return Tensor::zeros(std::move(shape));
}

void Backend::upload(const float* host, float* dst, std::size_t count) {
  if (count > 0 && host != dst) std::memcpy(dst, host, count * sizeof(float));
}

void Backend::download(const float* src, float* host, std::size_t count) {
  if (count > 0 && host != src) std::memcpy(host, src, count * sizeof(float));
}

void Backend::softmax_xent_accumulate(std::int64_t n, std::int64_t classes, const float* logits,
                                      const std::int32_t* labels, float label_smoothing,
                                      float grad_scale, float* dlogits) {
  const LossResult r =
      softmax_xent(n, classes, logits, labels, label_smoothing, grad_scale, dlogits);
  pending_loss_.loss_sum += r.loss_sum;
  pending_loss_.correct += r.correct;
}

Backend::LossResult Backend::take_loss() {
  const LossResult r = pending_loss_;
  pending_loss_ = {};
  return r;
}

}  // namespace ddp::backend
