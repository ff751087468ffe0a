// Convolution on oneDNN. Activations and weights stay in PyTorch's plain layouts (NCHW, OIHW) at
// the op's boundary, so the flat parameter buffer, snapshots and the other layers need no
// conversion; inside, each pass (forward, backward-data, backward-weights) lets oneDNN choose its
// layouts (blocked nChw16c and friends run the JIT direct-convolution kernels, 2-5x faster than the
// GEMM path plain NCHW gets) and reorders at the edges. Measured with bench/: see BENCHMARKS.md.
// Primitives are built once per batch size.
#include <map>
#include <optional>

#include "cpu_ops.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

// One argument of a primitive: the user's plain buffer, and when the primitive wants another
// layout, an internal buffer plus the reorder between the two.
struct Arg {
  dnnl::memory user;
  std::optional<dnnl::memory> inner;
  dnnl::reorder to_inner, from_inner;

  Arg(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted, bool input)
      : user(mem(plain)) {
    if (wanted == plain) return;
    inner = dnnl::memory(wanted, engine());
    if (input)
      to_inner = dnnl::reorder(user_template(plain), *inner);
    else
      from_inner = dnnl::reorder(*inner, user_template(plain));
  }
  static dnnl::memory user_template(const dnnl::memory::desc& d) { return mem(d); }

  // Before the primitive: bring an input into the primitive's layout.
  const dnnl::memory& in(const void* p) {
    bind(user, p);
    if (!inner) return user;
    to_inner.execute(stream(), user, *inner);
    return *inner;
  }
  // The memory an output is written to; out_done() copies it to the user's buffer.
  const dnnl::memory& out(void* p) {
    bind(user, p);
    return inner ? *inner : user;
  }
  void out_done() {
    if (inner) from_inner.execute(stream(), *inner, user);
  }
};

class Conv final : public ConvOp {
 public:
  explicit Conv(const ConvGeom& g) : g_(g) {}

  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    auto& p = prims(n);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, p.f_src->in(x)},
                                               {DNNL_ARG_WEIGHTS, p.f_wei->in(w)},
                                               {DNNL_ARG_DST, p.f_dst->out(y)}};
    if (g_.bias) {
      bind(p.bias, b);
      args.emplace(DNNL_ARG_BIAS, p.bias);
    }
    p.fwd.execute(stream(), args);
    p.f_dst->out_done();
    stream().wait();
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    auto& p = prims(n);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, p.w_src->in(x)},
                                               {DNNL_ARG_DIFF_DST, p.w_ddst->in(dy)},
                                               {DNNL_ARG_DIFF_WEIGHTS, p.w_dwei->out(dw)}};
    if (g_.bias) {
      bind(p.dbias, db);
      args.emplace(DNNL_ARG_DIFF_BIAS, p.dbias);
    }
    p.bwd_w.execute(stream(), args);
    p.w_dwei->out_done();
    if (dx) {
      p.bwd_d.execute(stream(), {{DNNL_ARG_DIFF_DST, p.d_ddst->in(dy)},
                                 {DNNL_ARG_WEIGHTS, p.d_wei->in(w)},
                                 {DNNL_ARG_DIFF_SRC, p.d_dsrc->out(dx)}});
      p.d_dsrc->out_done();
    }
    stream().wait();
  }

 private:
  struct Prims {
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data bwd_d;
    dnnl::convolution_backward_weights bwd_w;
    std::optional<Arg> f_src, f_wei, f_dst, w_src, w_ddst, w_dwei, d_ddst, d_wei, d_dsrc;
    dnnl::memory bias, dbias;
  };

  Prims& prims(std::int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    using dims = dnnl::memory::dims;
    const auto src = md({n, g_.c, g_.h, g_.w}, tag::nchw);
    const auto wei = md({g_.k, g_.c, g_.r, g_.s}, tag::oihw);
    const auto bias = md({g_.k}, tag::x);
    const auto dst = md({n, g_.k, g_.oh, g_.ow}, tag::nchw);
    const auto src_any = md({n, g_.c, g_.h, g_.w}, tag::any);
    const auto wei_any = md({g_.k, g_.c, g_.r, g_.s}, tag::any);
    const auto dst_any = md({n, g_.k, g_.oh, g_.ow}, tag::any);
    const dims strides{g_.stride, g_.stride}, pad{g_.pad, g_.pad};
    // Bottom/right padding so that the output extent is exactly oh/ow (PyTorch floors).
    const dims pad_r{(g_.oh - 1) * g_.stride + g_.r - g_.h - g_.pad,
                     (g_.ow - 1) * g_.stride + g_.s - g_.w - g_.pad};
    const auto alg = dnnl::algorithm::convolution_direct;
    auto fwd_desc =
        g_.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_any,
                                                  wei_any, bias, dst_any, strides, pad, pad_r)
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_any,
                                                  wei_any, dst_any, strides, pad, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, engine());
    // The input gradient of a convolution with very few input channels (the first layer; never
    // needed there) is faster on plain GEMM; otherwise let oneDNN choose.
    const bool plain_bwd_d = g_.c < 4;
    dnnl::convolution_backward_data::primitive_desc bwd_d_pd(
        dnnl::convolution_backward_data::desc(alg, plain_bwd_d ? src : src_any,
                                              plain_bwd_d ? wei : wei_any,
                                              plain_bwd_d ? dst : dst_any, strides, pad, pad_r),
        engine(), fwd_pd);
    auto bw_desc = g_.bias ? dnnl::convolution_backward_weights::desc(alg, src_any, wei_any, bias,
                                                                      dst_any, strides, pad, pad_r)
                           : dnnl::convolution_backward_weights::desc(alg, src_any, wei_any,
                                                                      dst_any, strides, pad, pad_r);
    dnnl::convolution_backward_weights::primitive_desc bwd_w_pd(bw_desc, engine(), fwd_pd);

    Prims& p = cache_[n];
    p.fwd = dnnl::convolution_forward(fwd_pd);
    p.bwd_d = dnnl::convolution_backward_data(bwd_d_pd);
    p.bwd_w = dnnl::convolution_backward_weights(bwd_w_pd);
    p.f_src.emplace(src, fwd_pd.src_desc(), true);
    p.f_wei.emplace(wei, fwd_pd.weights_desc(), true);
    p.f_dst.emplace(dst, fwd_pd.dst_desc(), false);
    p.w_src.emplace(src, bwd_w_pd.src_desc(), true);
    p.w_ddst.emplace(dst, bwd_w_pd.diff_dst_desc(), true);
    p.w_dwei.emplace(wei, bwd_w_pd.diff_weights_desc(), false);
    p.d_ddst.emplace(dst, bwd_d_pd.diff_dst_desc(), true);
    p.d_wei.emplace(wei, bwd_d_pd.weights_desc(), true);
    p.d_dsrc.emplace(src, bwd_d_pd.diff_src_desc(), false);
    p.bias = mem(bias);
    p.dbias = mem(bias);
    return p;
  }

  ConvGeom g_;
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(const ConvGeom& g) {
  return std::make_unique<Conv>(g);
}

}  // namespace ddp::backend::cpu
