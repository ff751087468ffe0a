#pragma once
// The loss, as an nn object: softmax cross-entropy over the model's logits with optional label
// smoothing (PyTorch's definition). The trainer asks it for the loss gradient and reads the summed
// loss and correct count back only when it needs them: on a GPU the sums stay on the device
// between reads, so a training step makes no host round trip for its loss.
#include <cstdint>

#include "ddp/backend/backend.hpp"
#include "ddp/tensor.hpp"

namespace ddp::nn {

struct LossSums {
  double loss_sum = 0.0;     // summed over samples (not yet divided)
  std::int64_t correct = 0;  // argmax predictions equal to the label
};

class SoftmaxCrossEntropy {
 public:
  // label_smoothing in [0, 1): the target puts 1 - eps on the label and eps / classes on every
  // class. Evaluation scores without smoothing: give it its own object with 0.
  SoftmaxCrossEntropy(backend::Backend& be, std::int64_t classes, double label_smoothing);

  // Adds the summed loss of logits [n, classes] against labels (host or device memory, as the
  // backend reads them) to the pending sums, and writes
  // dlogits = grad_scale * d(sum of the n losses) / dlogits (same shape as logits).
  void forward_backward(const Tensor& logits, const std::int32_t* labels, double grad_scale,
                        const Tensor& dlogits);
  // The same without a gradient (evaluation).
  void score(const Tensor& logits, const std::int32_t* labels);
  // The sums since the last take, and resets them (waits for a GPU).
  LossSums take();

  std::int64_t classes() const { return classes_; }

 private:
  void check(const Tensor& logits, const char* what) const;

  backend::Backend& be_;
  std::int64_t classes_;
  float smoothing_;
};

}  // namespace ddp::nn
