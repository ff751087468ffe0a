// Batch normalisation on oneDNN. oneDNN returns the batch mean and biased variance; the running
// statistics follow PyTorch (momentum update, unbiased variance), which oneDNN does not keep
// itself.
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
        unused_shift_(static_cast<std::size_t>(g.c)) {}

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

 private:
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
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormGeom& g) {
  return std::make_unique<BatchNorm>(g);
}

}  // namespace ddp::backend::cpu
