// Fused optimizer updates over the flat parameter buffer, PyTorch's update rules (torch.optim.SGD
// with dampening 0, torch.optim.Adam / AdamW), one pass over memory.
#include <cmath>

#include "cpu_kernels.hpp"

namespace ddp::backend::cpu {

void sgd_step(std::int64_t count, const Backend::SgdHyper& h, float* w, const float* g, float* m) {
  if (h.skip_if && *h.skip_if != 0) return;  // an overflowing step (unscale_flag)
  const float lr = h.lr, mu = h.momentum, wd = h.weight_decay;
  if (mu == 0.0f) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  if (h.nesterov) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      const float d = g[i] + wd * w[i];
      m[i] = mu * m[i] + d;
      w[i] -= lr * (d + mu * m[i]);
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      m[i] = mu * m[i] + (g[i] + wd * w[i]);
      w[i] -= lr * m[i];
    }
  }
}

void adam_step(std::int64_t count, const Backend::AdamHyper& h, float* w, const float* g, float* m,
               float* v) {
  if (h.skip_if && *h.skip_if != 0) return;
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double t = static_cast<double>(h.step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), t));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
  const float step_size = h.lr / bc1;
  const float decay = h.decoupled ? 1.0f - h.lr * wd : 1.0f;
  const float l2 = h.decoupled ? 0.0f : wd;
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float gi = g[i] + l2 * w[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    w[i] = w[i] * decay - step_size * m[i] / denom;
  }
}

}  // namespace ddp::backend::cpu
