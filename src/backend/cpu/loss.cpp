// Softmax cross-entropy with label smoothing, PyTorch's definition:
//   loss_i = (1-eps) * -log p_{i,y_i} + eps/K * sum_k -log p_{i,k}
// computed with the log-sum-exp shift in double for the per-sample sum.
#include <cmath>
#include <vector>

#include "cpu_kernels.hpp"

namespace ddp::backend::cpu {

Backend::LossResult softmax_xent(std::int64_t n, std::int64_t classes, const float* logits,
                                 const std::int32_t* labels, float label_smoothing,
                                 float grad_scale, float* dlogits) {
  Backend::LossResult r;
  const double eps = label_smoothing;
  const double off = eps / static_cast<double>(classes);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* z = logits + i * classes;
    const std::int32_t y = labels[i];
    std::int64_t arg = 0;
    for (std::int64_t k = 1; k < classes; ++k)
      if (z[k] > z[arg]) arg = k;
    if (arg == y) ++r.correct;
    const double zmax = z[arg];
    double sum = 0.0;
    for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k]) - zmax);
    const double lse = zmax + std::log(sum);
    double loss = (1.0 - eps) * (lse - z[y]);
    if (eps > 0.0) {
      double all = 0.0;
      for (std::int64_t k = 0; k < classes; ++k) all += lse - z[k];
      loss += off * all;
    }
    r.loss_sum += loss;
    if (dlogits) {
      float* d = dlogits + i * classes;
      for (std::int64_t k = 0; k < classes; ++k) {
        const double p = std::exp(static_cast<double>(z[k]) - lse);
        const double target = (k == y ? 1.0 - eps : 0.0) + off;
        d[k] = static_cast<float>((p - target) * grad_scale);
      }
    }
  }
  return r;
}

}  // namespace ddp::backend::cpu
