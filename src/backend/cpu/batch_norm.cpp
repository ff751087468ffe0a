// Batch normalisation as plain loops over NCHW memory: per channel, sums over the batch in double
// (in a fixed order, so the result does not depend on the thread count), then one pass that
// normalises. oneDNN 2.6's batch norm on plain NCHW memory is its generic C++ kernel ("ncsp"),
// 3-6x slower than these loops (bench/: ResNet-20's batch norms took ~100 ms of a 443 ms step on
// a 2-CPU AVX2 machine). The running statistics follow PyTorch (momentum update, unbiased
// variance). Sync batch norm uses the same loops, split around the sum over the ranks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_ops.hpp"
#include "ddp/cpu_clones.hpp"

namespace ddp::backend::cpu {
namespace {

// One (sample, channel) row of hw values each; built for AVX2 too (chosen at load time).
DDP_ALSO_AVX2 void row_sums(const float* p, std::int64_t len, double* s_out, double* q_out) {
  double s = 0.0, q = 0.0;
#pragma omp simd reduction(+ : s, q)
  for (std::int64_t j = 0; j < len; ++j) {
    const double v = p[j];
    s += v;
    q += v * v;
  }
  *s_out += s;
  *q_out += q;
}

DDP_ALSO_AVX2 void row_affine(const float* p, std::int64_t len, float mean, float a, float b,
                              float* q) {
  for (std::int64_t j = 0; j < len; ++j) q[j] = (p[j] - mean) * a + b;
}

DDP_ALSO_AVX2 void row_grad_sums(const float* p, const float* d, std::int64_t len, double mean,
                                 double invstd, double* s_out, double* t_out) {
  double s = 0.0, t = 0.0;
#pragma omp simd reduction(+ : s, t)
  for (std::int64_t j = 0; j < len; ++j) {
    s += d[j];
    t += static_cast<double>(d[j]) * ((p[j] - mean) * invstd);
  }
  *s_out += s;
  *t_out += t;
}

DDP_ALSO_AVX2 void row_grad(const float* p, const float* d, std::int64_t len, float mean,
                            float invstd, float a, float k1, float k2, float* q) {
  for (std::int64_t j = 0; j < len; ++j) q[j] = a * (d[j] - k1 - (p[j] - mean) * invstd * k2);
}

class BatchNorm final : public BatchNormOp {
 public:
  explicit BatchNorm(const BatchNormGeom& g)
      : g_(g),
        sums_(2 * static_cast<std::size_t>(g.c) + 1),
        dsums_(2 * static_cast<std::size_t>(g.c)),
        sync_mean_(static_cast<std::size_t>(g.c)),
        sync_invstd_(static_cast<std::size_t>(g.c)),
        eval_scale_(static_cast<std::size_t>(g.c)),
        eval_mean_(static_cast<std::size_t>(g.c)) {}

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    if (training) {
      forward_sums(n, x);
      forward_apply(n, x, gamma, beta, running_mean, running_var, y);
      return;
    }
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<std::size_t>(ch);
      eval_mean_[k] = running_mean[ch];
      eval_scale_[k] =
          static_cast<float>(gamma[ch] / std::sqrt(static_cast<double>(running_var[ch]) +
                                                   static_cast<double>(g_.eps)));
    }
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        row_affine(x + (i * c + ch) * hw, hw, eval_mean_[k], eval_scale_[k], beta[ch],
                   y + (i * c + ch) * hw);
      }
  }

  void backward(std::int64_t n, const float* x, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    backward_sums(n, x, dy, dgamma, dbeta);
    backward_apply(n, x, dy, gamma, dx);
  }

  // Sums in double per channel (the all-reduce adds them in double too); the variance is then
  // E[x^2] - mean^2, whose cancellation costs about 1e-16 * mean^2 / var relative: negligible for
  // activations (PyTorch combines per-rank Welford states instead, to the same effect in float).
  std::span<double> forward_sums(std::int64_t n, const float* x) override {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      double s = 0.0, q = 0.0;
      for (std::int64_t i = 0; i < n; ++i) row_sums(x + (i * c + ch) * hw, hw, &s, &q);
      sums_[static_cast<std::size_t>(ch)] = s;
      sums_[static_cast<std::size_t>(c + ch)] = q;
    }
    sums_[static_cast<std::size_t>(2 * c)] = static_cast<double>(n * hw);  // values per channel
    return sums_;
  }

  void forward_apply(std::int64_t n, const float* x, const float* gamma, const float* beta,
                     float* running_mean, float* running_var, float* y) override {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    count_ = sums_[static_cast<std::size_t>(2 * c)];
    if (count_ <= 0) return;  // no rank had a sample: nothing to normalise or learn from
    const float unbias = count_ > 1 ? static_cast<float>(count_ / (count_ - 1)) : 1.0f;
    const float m = g_.momentum;
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<std::size_t>(ch);
      const double mean = sums_[k] / count_;
      const double var =
          std::max(sums_[k + static_cast<std::size_t>(c)] / count_ - mean * mean, 0.0);
      sync_mean_[k] = static_cast<float>(mean);
      sync_invstd_[k] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(g_.eps)));
      // The plain op's update, in the same float arithmetic.
      running_mean[ch] = (1 - m) * running_mean[ch] + m * sync_mean_[k];
      running_var[ch] = (1 - m) * running_var[ch] + m * static_cast<float>(var) * unbias;
    }
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        row_affine(x + (i * c + ch) * hw, hw, sync_mean_[k], gamma[ch] * sync_invstd_[k], beta[ch],
                   y + (i * c + ch) * hw);
      }
    }
  }

  std::span<double> backward_sums(std::int64_t n, const float* x, const float* dy, float* dgamma,
                                  float* dbeta) override {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<std::size_t>(ch);
      const double mean = sync_mean_[k], invstd = sync_invstd_[k];
      double s = 0.0, t = 0.0;
      for (std::int64_t i = 0; i < n; ++i)
        row_grad_sums(x + (i * c + ch) * hw, dy + (i * c + ch) * hw, hw, mean, invstd, &s, &t);
      dsums_[k] = s;
      dsums_[k + static_cast<std::size_t>(c)] = t;
      dbeta[ch] = static_cast<float>(s);
      dgamma[ch] = static_cast<float>(t);
    }
    return dsums_;
  }

  void backward_apply(std::int64_t n, const float* x, const float* dy, const float* gamma,
                      float* dx) override {
    if (!dx || n == 0) return;
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), means over every rank's
    // samples.
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        const float mean = sync_mean_[k], invstd = sync_invstd_[k], a = gamma[ch] * invstd;
        const auto k1 = static_cast<float>(dsums_[k] / count_);
        const auto k2 = static_cast<float>(dsums_[k + static_cast<std::size_t>(c)] / count_);
        row_grad(x + (i * c + ch) * hw, dy + (i * c + ch) * hw, hw, mean, invstd, a, k1, k2,
                 dx + (i * c + ch) * hw);
      }
    }
  }

 private:
  // Below this many elements a loop runs on one thread (a parallel region costs microseconds).
  static constexpr std::int64_t kParallelMin = 1 << 15;

  BatchNormGeom g_;
  // The per-channel sums (all-reduced between the two halves under sync batch norm), the batch
  // statistics of the last training forward (for backward), and their count.
  std::vector<double> sums_, dsums_;
  std::vector<float> sync_mean_, sync_invstd_;
  double count_ = 0.0;
  std::vector<float> eval_scale_, eval_mean_;  // evaluation: gamma / sqrt(running_var + eps)
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormGeom& g) {
  return std::make_unique<BatchNorm>(g);
}

}  // namespace ddp::backend::cpu
