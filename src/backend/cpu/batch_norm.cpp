// Batch normalisation as plain loops: per channel, sums over the batch in double (in a fixed order,
// so the result does not depend on the thread count), then one pass that normalises. oneDNN 2.6's
// batch norm on plain NCHW memory is its generic C++ kernel ("ncsp"), 3-6x slower than these loops
// (ResNet-20's batch norms took ~100 ms of a 443 ms step on a 2-CPU AVX2 machine). The running
// statistics follow PyTorch (momentum update, unbiased variance). Sync batch norm uses the same
// loops, split around the sum over the ranks. Activations are plain NCHW (a row of h*w values per
// sample and channel) or blocked nChw<B>c (BatchNormGeom::block: per sample and block of B
// channels, h*w pixels of B interleaved channels). A ReLU or ReLU6 after the batch norm may be
// fused (BatchNormGeom::activation): forward writes act(bn(x)), and backward masks dy where act's
// gradient is zero, recomputing bn(x) from x exactly as forward did (the same expression, so the
// mask is bitwise the activation layer's own) instead of reading the output.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu_ops.hpp"
#include "ddp/cpu_clones.hpp"
#include "ddp/error.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

// Plain layout: one (sample, channel) row of len values. Built for AVX2 too (chosen at load time).
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

// The fused activation: kRelu or kRelu6. act_out is the activation layer's forward (cpu/
// activation.cpp: NaN stays NaN); act_grad its backward, from the input v rather than the output
// (the same mask for every v: v > 0, and v < 6 for ReLU6).
constexpr int kRelu = 1, kRelu6 = 2;
inline float act_out(float v, int act) {
  const float lo = v < 0.0f ? 0.0f : v;
  return act == kRelu6 && lo > 6.0f ? 6.0f : lo;
}
inline float act_grad(float v, float d, int act) {
  // d or +0 by a bit mask: a select here keeps GCC from vectorising the double sums.
  const bool pass = (v > 0.0f) & ((act != kRelu6) | (v < 6.0f));
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(d) &
                              (0u - static_cast<std::uint32_t>(pass)));
}

// The fused versions of the loops above: y = act((x - mean) * a + b), and backward's dy replaced by
// act_grad of the pre-activation recomputed with forward's scale and shift (fa, b).
DDP_ALSO_AVX2 void row_affine_act(const float* p, std::int64_t len, float mean, float a, float b,
                                  int act, float* q) {
  for (std::int64_t j = 0; j < len; ++j) q[j] = act_out((p[j] - mean) * a + b, act);
}

DDP_ALSO_AVX2 void row_grad_sums_act(const float* p, const float* d, std::int64_t len, double mean,
                                     double invstd, float fmean, float a, float b, int act,
                                     double* s_out, double* t_out) {
  double s = 0.0, t = 0.0;
#pragma omp simd reduction(+ : s, t)
  for (std::int64_t j = 0; j < len; ++j) {
    const float dy = act_grad((p[j] - fmean) * a + b, d[j], act);
    s += dy;
    t += static_cast<double>(dy) * ((p[j] - mean) * invstd);
  }
  *s_out += s;
  *t_out += t;
}

DDP_ALSO_AVX2 void row_grad_act(const float* p, const float* d, std::int64_t len, float mean,
                                float invstd, float fa, float b, int act, float a, float k1,
                                float k2, float* q) {
  for (std::int64_t j = 0; j < len; ++j) {
    const float dy = act_grad((p[j] - mean) * fa + b, d[j], act);
    q[j] = a * (dy - k1 - (p[j] - mean) * invstd * k2);
  }
}

// Blocked layout: len pixels of B channels each; the per-channel arguments point at the block's
// first channel. Sums are added to s[0..B) and q[0..B).
constexpr int kMaxBlock = 16;

DDP_ALSO_AVX2 void block_sums(const float* p, std::int64_t len, int B, double* s, double* q) {
  double ls[kMaxBlock] = {}, lq[kMaxBlock] = {};
  for (std::int64_t j = 0; j < len; ++j) {
    const float* v = p + j * B;
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const double x = v[l];
      ls[l] += x;
      lq[l] += x * x;
    }
  }
  for (int l = 0; l < B; ++l) {
    s[l] += ls[l];
    q[l] += lq[l];
  }
}

DDP_ALSO_AVX2 void block_affine(const float* p, std::int64_t len, int B, const float* mean,
                                const float* a, const float* b, float* q) {
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) q[j * B + l] = (p[j * B + l] - mean[l]) * a[l] + b[l];
  }
}

DDP_ALSO_AVX2 void block_grad_sums(const float* p, const float* d, std::int64_t len, int B,
                                   const float* mean, const float* invstd, double* s, double* t) {
  double ls[kMaxBlock] = {}, lt[kMaxBlock] = {};
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const double dy = d[j * B + l];
      ls[l] += dy;
      lt[l] += dy * ((p[j * B + l] - static_cast<double>(mean[l])) * invstd[l]);
    }
  }
  for (int l = 0; l < B; ++l) {
    s[l] += ls[l];
    t[l] += lt[l];
  }
}

DDP_ALSO_AVX2 void block_grad(const float* p, const float* d, std::int64_t len, int B,
                              const float* mean, const float* invstd, const float* a,
                              const float* k1, const float* k2, float* q) {
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const std::int64_t e = j * B + l;
      q[e] = a[l] * (d[e] - k1[l] - (p[e] - mean[l]) * invstd[l] * k2[l]);
    }
  }
}

DDP_ALSO_AVX2 void block_affine_act(const float* p, std::int64_t len, int B, const float* mean,
                                    const float* a, const float* b, int act, float* q) {
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) q[j * B + l] = act_out((p[j * B + l] - mean[l]) * a[l] + b[l], act);
  }
}

DDP_ALSO_AVX2 void block_grad_sums_act(const float* p, const float* d, std::int64_t len, int B,
                                       const float* mean, const float* invstd, const float* a,
                                       const float* b, int act, double* s, double* t) {
  double ls[kMaxBlock] = {}, lt[kMaxBlock] = {};
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float x = p[j * B + l];
      const double dy = act_grad((x - mean[l]) * a[l] + b[l], d[j * B + l], act);
      ls[l] += dy;
      lt[l] += dy * ((x - static_cast<double>(mean[l])) * invstd[l]);
    }
  }
  for (int l = 0; l < B; ++l) {
    s[l] += ls[l];
    t[l] += lt[l];
  }
}

DDP_ALSO_AVX2 void block_grad_act(const float* p, const float* d, std::int64_t len, int B,
                                  const float* mean, const float* invstd, const float* fa,
                                  const float* b, int act, const float* a, const float* k1,
                                  const float* k2, float* q) {
  for (std::int64_t j = 0; j < len; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const std::int64_t e = j * B + l;
      const float dy = act_grad((p[e] - mean[l]) * fa[l] + b[l], d[e], act);
      q[e] = a[l] * (dy - k1[l] - (p[e] - mean[l]) * invstd[l] * k2[l]);
    }
  }
}

class BatchNorm final : public BatchNormOp {
 public:
  explicit BatchNorm(const BatchNormGeom& g)
      : g_(g),
        act_(!g.activation                        ? 0
             : *g.activation == Activation::relu6 ? kRelu6
                                                  : kRelu),
        sums_(2 * static_cast<std::size_t>(g.c) + 1),
        dsums_(2 * static_cast<std::size_t>(g.c)),
        mean_(static_cast<std::size_t>(g.c)),
        invstd_(static_cast<std::size_t>(g.c)),
        scale_(static_cast<std::size_t>(g.c)),
        k1_(static_cast<std::size_t>(g.c)),
        k2_(static_cast<std::size_t>(g.c)) {}

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    if (training) {
      forward_sums(n, x);
      forward_apply(n, x, gamma, beta, running_mean, running_var, y);
      return;
    }
    // Its own factors: the batch statistics stay for a backward after this evaluation.
    eval_scale_.resize(static_cast<std::size_t>(g_.c));
    for (std::int64_t ch = 0; ch < g_.c; ++ch)
      eval_scale_[static_cast<std::size_t>(ch)] =
          static_cast<float>(gamma[ch] / std::sqrt(static_cast<double>(running_var[ch]) +
                                                   static_cast<double>(g_.eps)));
    affine(n, x, running_mean, eval_scale_.data(), beta, y);
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
    if (g_.block > 0) {
      block_reduce(n, [&](std::int64_t i, std::int64_t cb, double* s, double* q) {
        block_sums(x + (i * c + cb * g_.block) * hw, hw, g_.block, s + cb * g_.block,
                   q + cb * g_.block);
      });
      std::copy(partial_.begin(), partial_.begin() + 2 * c, sums_.begin());
    } else {
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        double s = 0.0, q = 0.0;
        for (std::int64_t i = 0; i < n; ++i) row_sums(x + (i * c + ch) * hw, hw, &s, &q);
        sums_[static_cast<std::size_t>(ch)] = s;
        sums_[static_cast<std::size_t>(c + ch)] = q;
      }
    }
    sums_[static_cast<std::size_t>(2 * c)] = static_cast<double>(n * hw);  // values per channel
    return sums_;
  }

  void forward_apply(std::int64_t n, const float* x, const float* gamma, const float* beta,
                     float* running_mean, float* running_var, float* y) override {
    const std::int64_t c = g_.c;
    count_ = sums_[static_cast<std::size_t>(2 * c)];
    if (count_ <= 0) return;  // no rank had a sample: nothing to normalise or learn from
    const float unbias = count_ > 1 ? static_cast<float>(count_ / (count_ - 1)) : 1.0f;
    const float m = g_.momentum;
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<std::size_t>(ch);
      const double mean = sums_[k] / count_;
      const double var =
          std::max(sums_[k + static_cast<std::size_t>(c)] / count_ - mean * mean, 0.0);
      mean_[k] = static_cast<float>(mean);
      invstd_[k] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(g_.eps)));
      running_mean[ch] = (1 - m) * running_mean[ch] + m * mean_[k];
      running_var[ch] = (1 - m) * running_var[ch] + m * static_cast<float>(var) * unbias;
      scale_[k] = gamma[ch] * invstd_[k];
    }
    if (act_) {  // backward recomputes the pre-activation with these
      fscale_ = scale_;
      shift_.assign(beta, beta + c);
    }
    affine(n, x, mean_.data(), scale_.data(), beta, y);
  }

  std::span<double> backward_sums(std::int64_t n, const float* x, const float* dy, float* dgamma,
                                  float* dbeta) override {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    if (g_.block > 0) {
      const int B = g_.block;
      block_reduce(n, [&](std::int64_t i, std::int64_t cb, double* s, double* t) {
        const std::int64_t at = (i * c + cb * B) * hw, ch = cb * B;
        if (act_) {
          block_grad_sums_act(x + at, dy + at, hw, B, mean_.data() + ch, invstd_.data() + ch,
                              fscale_.data() + ch, shift_.data() + ch, act_, s + ch, t + ch);
        } else {
          block_grad_sums(x + at, dy + at, hw, B, mean_.data() + ch, invstd_.data() + ch, s + ch,
                          t + ch);
        }
      });
      std::copy(partial_.begin(), partial_.begin() + 2 * c, dsums_.begin());
    } else {
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        double s = 0.0, t = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t at = (i * c + ch) * hw;
          if (act_) {
            row_grad_sums_act(x + at, dy + at, hw, mean_[k], invstd_[k], mean_[k], fscale_[k],
                              shift_[k], act_, &s, &t);
          } else {
            row_grad_sums(x + at, dy + at, hw, mean_[k], invstd_[k], &s, &t);
          }
        }
        dsums_[k] = s;
        dsums_[k + static_cast<std::size_t>(c)] = t;
      }
    }
    for (std::int64_t ch = 0; ch < c; ++ch) {
      dbeta[ch] = static_cast<float>(dsums_[static_cast<std::size_t>(ch)]);
      dgamma[ch] = static_cast<float>(dsums_[static_cast<std::size_t>(c + ch)]);
    }
    return dsums_;
  }

  // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), means over every rank's
  // samples.
  void backward_apply(std::int64_t n, const float* x, const float* dy, const float* gamma,
                      float* dx) override {
    if (!dx || n == 0) return;
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<std::size_t>(ch);
      scale_[k] = gamma[ch] * invstd_[k];
      k1_[k] = static_cast<float>(dsums_[k] / count_);
      k2_[k] = static_cast<float>(dsums_[k + static_cast<std::size_t>(c)] / count_);
    }
    if (g_.block > 0) {
      const int B = g_.block;
      each_block(n, [&](std::int64_t at, std::int64_t ch) {
        if (act_) {
          block_grad_act(x + at, dy + at, hw, B, mean_.data() + ch, invstd_.data() + ch,
                         fscale_.data() + ch, shift_.data() + ch, act_, scale_.data() + ch,
                         k1_.data() + ch, k2_.data() + ch, dx + at);
        } else {
          block_grad(x + at, dy + at, hw, B, mean_.data() + ch, invstd_.data() + ch,
                     scale_.data() + ch, k1_.data() + ch, k2_.data() + ch, dx + at);
        }
      });
      return;
    }
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        const std::int64_t at = (i * c + ch) * hw;
        if (act_) {
          row_grad_act(x + at, dy + at, hw, mean_[k], invstd_[k], fscale_[k], shift_[k], act_,
                       scale_[k], k1_[k], k2_[k], dx + at);
        } else {
          row_grad(x + at, dy + at, hw, mean_[k], invstd_[k], scale_[k], k1_[k], k2_[k], dx + at);
        }
      }
    }
  }

 private:
  // Below this many elements a loop runs on one thread (a parallel region costs microseconds).
  static constexpr std::int64_t kParallelMin = 1 << 15;
  // Blocked sums: samples in groups of this many, each group's per-channel sums added in group
  // order, so that the result does not depend on the thread count.
  static constexpr std::int64_t kGroup = 4;

  // Blocked layout: f(at, ch) for every sample's every block of channels, in parallel; `at` is the
  // block's offset in the activation, `ch` its first channel.
  template <class F>
  void each_block(std::int64_t n, const F& f) const {
    const std::int64_t c = g_.c, hw = g_.h * g_.w, B = g_.block, blocks = c / B;
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t cb = 0; cb < blocks; ++cb) f((i * c + cb * B) * hw, cb * B);
  }

  // y = (x - mean) * scale + shift per channel, then the fused activation.
  void affine(std::int64_t n, const float* x, const float* mean, const float* scale,
              const float* shift, float* y) {
    const std::int64_t c = g_.c, hw = g_.h * g_.w;
    if (g_.block > 0) {
      each_block(n, [&](std::int64_t at, std::int64_t ch) {
        if (act_) {
          block_affine_act(x + at, hw, g_.block, mean + ch, scale + ch, shift + ch, act_, y + at);
        } else {
          block_affine(x + at, hw, g_.block, mean + ch, scale + ch, shift + ch, y + at);
        }
      });
      return;
    }
#pragma omp parallel for collapse(2) if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const std::int64_t at = (i * c + ch) * hw;
        if (act_) {
          row_affine_act(x + at, hw, mean[ch], scale[ch], shift[ch], act_, y + at);
        } else {
          row_affine(x + at, hw, mean[ch], scale[ch], shift[ch], y + at);
        }
      }
  }

  // Two per-channel sums over the blocked batch: add(i, cb, first, second) adds sample i's block cb
  // to first[cb * B ...] and second[cb * B ...]. The totals land in partial_[0, 2c).
  template <class Add>
  void block_reduce(std::int64_t n, const Add& add) {
    const std::int64_t c = g_.c, hw = g_.h * g_.w, blocks = c / g_.block;
    const std::int64_t groups = std::max<std::int64_t>(1, (n + kGroup - 1) / kGroup);
    partial_.assign(static_cast<std::size_t>(groups * 2 * c), 0.0);
#pragma omp parallel for if (n * c * hw >= kParallelMin) schedule(static)
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      double* first = partial_.data() + gi * 2 * c;
      for (std::int64_t i = gi * kGroup; i < std::min(n, (gi + 1) * kGroup); ++i)
        for (std::int64_t cb = 0; cb < blocks; ++cb) add(i, cb, first, first + c);
    }
    for (std::int64_t gi = 1; gi < groups; ++gi)
      for (std::int64_t k = 0; k < 2 * c; ++k)
        partial_[static_cast<std::size_t>(k)] += partial_[static_cast<std::size_t>(gi * 2 * c + k)];
  }

  BatchNormGeom g_;
  int act_;  // the fused activation: 0 none, kRelu, kRelu6
  // The per-channel sums (all-reduced between the two halves under sync batch norm) and their
  // count; the statistics of the last training forward (read by backward); per-channel factors.
  std::vector<double> sums_, dsums_, partial_;
  double count_ = 0.0;
  std::vector<float> mean_, invstd_, scale_, k1_, k2_;
  // With a fused activation: the last training forward's scale and beta (its pre-activation).
  std::vector<float> fscale_, shift_;
  std::vector<float> eval_scale_;  // evaluation: gamma / sqrt(running_var + eps)
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormGeom& g) {
  check_block(g.block, g.c, "batch norm");
  if (g.activation && *g.activation != Activation::relu && *g.activation != Activation::relu6)
    throw Error("internal: batch norm fuses only ReLU and ReLU6");
  return std::make_unique<BatchNorm>(g);
}

}  // namespace ddp::backend::cpu
