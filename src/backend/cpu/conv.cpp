// Convolution on oneDNN with plain NCHW activations and OIHW weights (PyTorch's layouts, so the flat
// parameter buffer and snapshots need no conversion). Primitives are built once per batch size.
#include <map>

#include "cpu_ops.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

class Conv final : public ConvOp {
 public:
  explicit Conv(const ConvGeom& g) : g_(g) {}

  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    auto& p = prims(n);
    bind(p.src, x);
    bind(p.wei, w);
    bind(p.dst, y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DST, p.dst}};
    if (g_.bias) {
      bind(p.bias, b);
      args.emplace(DNNL_ARG_BIAS, p.bias);
    }
    p.fwd.execute(stream(), args);
    stream().wait();
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    auto& p = prims(n);
    bind(p.src, x);
    bind(p.ddst, dy);
    bind(p.dwei, dw);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, p.src}, {DNNL_ARG_DIFF_DST, p.ddst}, {DNNL_ARG_DIFF_WEIGHTS, p.dwei}};
    if (g_.bias) {
      bind(p.dbias, db);
      args.emplace(DNNL_ARG_DIFF_BIAS, p.dbias);
    }
    p.bwd_w.execute(stream(), args);
    if (dx) {
      bind(p.wei, w);
      bind(p.dsrc, dx);
      p.bwd_d.execute(stream(), {{DNNL_ARG_DIFF_DST, p.ddst},
                                 {DNNL_ARG_WEIGHTS, p.wei},
                                 {DNNL_ARG_DIFF_SRC, p.dsrc}});
    }
    stream().wait();
  }

 private:
  struct Prims {
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data bwd_d;
    dnnl::convolution_backward_weights bwd_w;
    dnnl::memory src, wei, bias, dst, dsrc, dwei, dbias, ddst;
  };

  Prims& prims(std::int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    using dims = dnnl::memory::dims;
    const auto src = md({n, g_.c, g_.h, g_.w}, tag::nchw);
    const auto wei = md({g_.k, g_.c, g_.r, g_.s}, tag::oihw);
    const auto bias = md({g_.k}, tag::x);
    const auto dst = md({n, g_.k, g_.oh, g_.ow}, tag::nchw);
    const dims strides{g_.stride, g_.stride}, pad{g_.pad, g_.pad};
    // Bottom/right padding so that the output extent is exactly oh/ow (PyTorch floors).
    const dims pad_r{(g_.oh - 1) * g_.stride + g_.r - g_.h - g_.pad,
                     (g_.ow - 1) * g_.stride + g_.s - g_.w - g_.pad};
    const auto alg = dnnl::algorithm::convolution_direct;
    auto fwd_desc =
        g_.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei,
                                                  bias, dst, strides, pad, pad_r)
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei,
                                                  dst, strides, pad, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, engine());
    dnnl::convolution_backward_data::primitive_desc bwd_d_pd(
        dnnl::convolution_backward_data::desc(alg, src, wei, dst, strides, pad, pad_r), engine(),
        fwd_pd);
    auto bw_desc = g_.bias ? dnnl::convolution_backward_weights::desc(alg, src, wei, bias, dst,
                                                                      strides, pad, pad_r)
                           : dnnl::convolution_backward_weights::desc(alg, src, wei, dst, strides,
                                                                      pad, pad_r);
    dnnl::convolution_backward_weights::primitive_desc bwd_w_pd(bw_desc, engine(), fwd_pd);
    Prims p{dnnl::convolution_forward(fwd_pd),
            dnnl::convolution_backward_data(bwd_d_pd),
            dnnl::convolution_backward_weights(bwd_w_pd),
            mem(src),
            mem(wei),
            mem(bias),
            mem(dst),
            mem(src),
            mem(wei),
            mem(bias),
            mem(dst)};
    return cache_.emplace(n, std::move(p)).first->second;
  }

  ConvGeom g_;
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(const ConvGeom& g) { return std::make_unique<Conv>(g); }

}  // namespace ddp::backend::cpu
