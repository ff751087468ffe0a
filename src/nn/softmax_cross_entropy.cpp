#include <string>

#include "ddp/error.hpp"
#include "ddp/nn/loss.hpp"

namespace ddp::nn {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(backend::Backend& be, std::int64_t classes,
                                         double label_smoothing)
    : be_(be), classes_(classes), smoothing_(static_cast<float>(label_smoothing)) {
  if (classes < 1) throw Error("internal: a loss over " + std::to_string(classes) + " classes");
  if (!(label_smoothing >= 0.0 && label_smoothing < 1.0))
    throw ConfigError("train.label_smoothing = " + std::to_string(label_smoothing) +
                      " must be in [0, 1)");
}

void SoftmaxCrossEntropy::check(const Tensor& t, const char* what) const {
  // The model's last layer fixes the width; anything else is a wiring bug, not a user error.
  if (t.shape().rank() < 1 || t.numel() != t.shape()[0] * classes_)
    throw Error(std::string("internal: the loss got ") + what + " of shape " + t.shape().str() +
                ", expected n x " + std::to_string(classes_) + " values");
}

void SoftmaxCrossEntropy::forward_backward(const Tensor& logits, const std::int32_t* labels,
                                           double grad_scale, const Tensor& dlogits) {
  check(logits, "logits");
  check(dlogits, "a logit gradient");
  be_.softmax_xent_accumulate(logits.shape()[0], classes_, logits.data(), labels, smoothing_,
                              static_cast<float>(grad_scale), dlogits.data());
}

void SoftmaxCrossEntropy::score(const Tensor& logits, const std::int32_t* labels) {
  check(logits, "logits");
  be_.softmax_xent_accumulate(logits.shape()[0], classes_, logits.data(), labels, smoothing_, 0.0f,
                              nullptr);
}

LossSums SoftmaxCrossEntropy::take() {
  const auto r = be_.take_loss();
  return LossSums{r.loss_sum, r.correct};
}

}  // namespace ddp::nn
