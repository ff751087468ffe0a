// Fully connected layers as oneDNN inner products: src [n, in], weights [out, in] (PyTorch's
// nn.Linear layout), bias [out].
#include <map>

#include "cpu_ops.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

class Linear final : public LinearOp {
 public:
  explicit Linear(const LinearGeom& g) : g_(g) {}

  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    auto& p = prims(n);
    set_handle(p.src, x);
    set_handle(p.wei, w);
    set_handle(p.dst, y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DST, p.dst}};
    if (g_.bias) {
      set_handle(p.bias, b);
      args.emplace(DNNL_ARG_BIAS, p.bias);
    }
    p.fwd.execute(stream(), args);
    stream().wait();
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    auto& p = prims(n);
    set_handle(p.src, x);
    set_handle(p.ddst, dy);
    set_handle(p.dwei, dw);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, p.src}, {DNNL_ARG_DIFF_DST, p.ddst}, {DNNL_ARG_DIFF_WEIGHTS, p.dwei}};
    if (g_.bias) {
      set_handle(p.dbias, db);
      args.emplace(DNNL_ARG_DIFF_BIAS, p.dbias);
    }
    p.bwd_w.execute(stream(), args);
    if (dx) {
      set_handle(p.wei, w);
      set_handle(p.dsrc, dx);
      p.bwd_d.execute(
          stream(),
          {{DNNL_ARG_DIFF_DST, p.ddst}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DIFF_SRC, p.dsrc}});
    }
    stream().wait();
  }

 private:
  struct Prims {
    dnnl::inner_product_forward fwd;
    dnnl::inner_product_backward_data bwd_d;
    dnnl::inner_product_backward_weights bwd_w;
    dnnl::memory src, wei, bias, dst, dsrc, dwei, dbias, ddst;
  };

  Prims& prims(std::int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    const auto src = md({n, g_.in}, tag::nc);
    const auto wei = md({g_.out, g_.in}, tag::oi);
    const auto bias = md({g_.out}, tag::x);
    const auto dst = md({n, g_.out}, tag::nc);
    auto fwd_desc = g_.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training,
                                                                src, wei, bias, dst)
                            : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training,
                                                                src, wei, dst);
    dnnl::inner_product_forward::primitive_desc fwd_pd(fwd_desc, engine());
    dnnl::inner_product_backward_data::primitive_desc bwd_d_pd(
        dnnl::inner_product_backward_data::desc(src, wei, dst), engine(), fwd_pd);
    auto bw_desc = g_.bias ? dnnl::inner_product_backward_weights::desc(src, wei, bias, dst)
                           : dnnl::inner_product_backward_weights::desc(src, wei, dst);
    dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd(bw_desc, engine(), fwd_pd);
    Prims p{dnnl::inner_product_forward(fwd_pd),
            dnnl::inner_product_backward_data(bwd_d_pd),
            dnnl::inner_product_backward_weights(bwd_w_pd),
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

  LinearGeom g_;
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(const LinearGeom& g) {
  return std::make_unique<Linear>(g);
}

}  // namespace ddp::backend::cpu
