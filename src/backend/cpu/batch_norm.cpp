// Batch normalisation on oneDNN. oneDNN returns the batch mean and biased variance; the running
// statistics follow PyTorch (momentum update, unbiased variance), which oneDNN does not keep
// itself. Sync batch norm (statistics summed over ranks between two halves of each pass) is plain
// loops: oneDNN has no split of its reductions from its normalisation in backward.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "cpu_ops.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

class BatchNorm final : public BatchNormOp {
 public:
  explicit BatchNorm(const BatchNormGeom& g)
      : g_(g),
        mean_(static_cast<std::size_t>(g.c)),
        var_(static_cast<std::size_t>(g.c)),
        unused_shift_(static_cast<std::size_t>(g.c)),
        sums_(2 * static_cast<std::size_t>(g.c) + 1),
        dsums_(2 * static_cast<std::size_t>(g.c)),
        sync_mean_(static_cast<std::size_t>(g.c)),
        sync_invstd_(static_cast<std::size_t>(g.c)) {}

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    auto& p = prims(n);
    bind(p.src, x);
    bind(p.dst, y);
    bind(p.scale, gamma);
    bind(p.shift, beta);
    if (training) {
      bind(p.mean, mean_.data());
      bind(p.var, var_.data());
      p.fwd_train.execute(stream(), {{DNNL_ARG_SRC, p.src},
                                     {DNNL_ARG_DST, p.dst},
                                     {DNNL_ARG_SCALE, p.scale},
                                     {DNNL_ARG_SHIFT, p.shift},
                                     {DNNL_ARG_MEAN, p.mean},
                                     {DNNL_ARG_VARIANCE, p.var}});
      stream().wait();
      const std::int64_t count = n * g_.h * g_.w;
      const float unbias =
          count > 1 ? static_cast<float>(count) / static_cast<float>(count - 1) : 1;
      const float m = g_.momentum;
      for (std::int64_t c = 0; c < g_.c; ++c) {
        running_mean[c] = (1 - m) * running_mean[c] + m * mean_[c];
        running_var[c] = (1 - m) * running_var[c] + m * var_[c] * unbias;
      }
    } else {
      bind(p.mean, running_mean);
      bind(p.var, running_var);
      p.fwd_infer.execute(stream(), {{DNNL_ARG_SRC, p.src},
                                     {DNNL_ARG_DST, p.dst},
                                     {DNNL_ARG_SCALE, p.scale},
                                     {DNNL_ARG_SHIFT, p.shift},
                                     {DNNL_ARG_MEAN, p.mean},
                                     {DNNL_ARG_VARIANCE, p.var}});
      stream().wait();
    }
  }

  void backward(std::int64_t n, const float* x, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    auto& p = prims(n);
    bind(p.src, x);
    bind(p.ddst, dy);
    bind(p.scale, gamma);
    bind(p.mean, mean_.data());
    bind(p.var, var_.data());
    bind(p.dsrc, dx);
    bind(p.dscale, dgamma);
    bind(p.dshift, dbeta);
    // oneDNN 2.6 insists on a shift argument in backward although the result does not use it.
    bind(p.shift, unused_shift_.data());
    p.bwd.execute(stream(), {{DNNL_ARG_SRC, p.src},
                             {DNNL_ARG_DIFF_DST, p.ddst},
                             {DNNL_ARG_SCALE, p.scale},
                             {DNNL_ARG_SHIFT, p.shift},
                             {DNNL_ARG_MEAN, p.mean},
                             {DNNL_ARG_VARIANCE, p.var},
                             {DNNL_ARG_DIFF_SRC, p.dsrc},
                             {DNNL_ARG_DIFF_SCALE, p.dscale},
                             {DNNL_ARG_DIFF_SHIFT, p.dshift}});
    stream().wait();
  }

  // Sums in double per channel (the all-reduce adds them in double too); the variance is then
  // E[x^2] - mean^2, whose cancellation costs about 1e-16 * mean^2 / var relative: negligible for
  // activations (PyTorch combines per-rank Welford states instead, to the same effect in float).
  std::span<double> forward_sums(std::int64_t n, const float* x) override {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      double s = 0.0, q = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * hw;
#pragma omp simd reduction(+ : s, q)
        for (std::int64_t j = 0; j < hw; ++j) {
          const double v = p[j];
          s += v;
          q += v * v;
        }
      }
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
        const float mean = sync_mean_[k], a = gamma[ch] * sync_invstd_[k], b = beta[ch];
        const float* p = x + (i * c + ch) * hw;
        float* q = y + (i * c + ch) * hw;
        for (std::int64_t j = 0; j < hw; ++j) q[j] = (p[j] - mean) * a + b;
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
      for (std::int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * hw;
        const float* d = dy + (i * c + ch) * hw;
#pragma omp simd reduction(+ : s, t)
        for (std::int64_t j = 0; j < hw; ++j) {
          s += d[j];
          t += static_cast<double>(d[j]) * ((p[j] - mean) * invstd);
        }
      }
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
        const float* p = x + (i * c + ch) * hw;
        const float* d = dy + (i * c + ch) * hw;
        float* q = dx + (i * c + ch) * hw;
        for (std::int64_t j = 0; j < hw; ++j) q[j] = a * (d[j] - k1 - (p[j] - mean) * invstd * k2);
      }
    }
  }

 private:
  // Below this many elements a loop runs on one thread (a parallel region costs microseconds).
  static constexpr std::int64_t kParallelMin = 1 << 15;

  struct Prims {
    dnnl::batch_normalization_forward fwd_train, fwd_infer;
    dnnl::batch_normalization_backward bwd;
    dnnl::memory src, dst, dsrc, ddst, scale, shift, dscale, dshift, mean, var;
  };

  Prims& prims(std::int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    using flags = dnnl::normalization_flags;
    const auto data = md({n, g_.c, g_.h, g_.w}, tag::nchw);
    const auto vec = md({g_.c}, tag::x);
    const auto ss = flags::use_scale | flags::use_shift;
    dnnl::batch_normalization_forward::primitive_desc train_pd(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, data, g_.eps,
                                                ss),
        engine());
    dnnl::batch_normalization_forward::primitive_desc infer_pd(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, data, g_.eps,
                                                ss | flags::use_global_stats),
        engine());
    dnnl::batch_normalization_backward::primitive_desc bwd_pd(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, data, data, g_.eps, ss),
        engine(), train_pd);
    Prims p{dnnl::batch_normalization_forward(train_pd),
            dnnl::batch_normalization_forward(infer_pd),
            dnnl::batch_normalization_backward(bwd_pd),
            mem(data),
            mem(data),
            mem(data),
            mem(data),
            mem(vec),
            mem(vec),
            mem(vec),
            mem(vec),
            mem(vec),
            mem(vec)};
    return cache_.emplace(n, std::move(p)).first->second;
  }

  BatchNormGeom g_;
  std::vector<float> mean_, var_;  // batch statistics of the last training forward
  std::vector<float> unused_shift_;
  // Sync batch norm: the sums the caller all-reduces, the statistics of the summed samples, and
  // their count.
  std::vector<double> sums_, dsums_;
  std::vector<float> sync_mean_, sync_invstd_;
  double count_ = 0.0;
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormGeom& g) {
  return std::make_unique<BatchNorm>(g);
}

}  // namespace ddp::backend::cpu
