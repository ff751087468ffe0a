// Max and average pooling on oneDNN. Max pooling keeps oneDNN's argmax workspace from the last
// training forward for the backward pass. Average pooling excludes padding (PyTorch's
// count_include_pad=False is not the default, but with our zero-padding configs both agree).
#include <cstdint>
#include <map>
#include <vector>

#include "cpu_ops.hpp"
#include "ddp/error.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

// 2x2/stride-2 max pooling - LeNet's and the VGG nets' only pooling - written out: oneDNN's
// plain-layout pooling walks one row at a time, this reads two input rows per output row and keeps
// a 2-bit argmax per output for backward. Same result as oneDNN's (first max wins). On plain NCHW
// planes of single values, or on blocked nChw<B>c planes of B-channel pixels, lane by lane.
class MaxPool2x2 final : public PoolOp {
 public:
  explicit MaxPool2x2(const PoolGeom& g) : g_(g), lanes_(g.block > 0 ? g.block : 1) {}

  void forward(std::int64_t n, const float* x, float* y, bool training) override {
    const std::int64_t planes = n * g_.c / lanes_, h = g_.h, w = g_.w, oh = g_.oh, ow = g_.ow;
    const std::int64_t L = lanes_;
    if (training) argmax_.resize(static_cast<std::size_t>(planes * oh * ow * L));
    std::uint8_t* am = training ? argmax_.data() : nullptr;
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * h * w * L;
      float* yp = y + p * oh * ow * L;
      std::uint8_t* ap = am ? am + p * oh * ow * L : nullptr;
      for (std::int64_t i = 0; i < oh; ++i) {
        const float* r0 = xp + 2 * i * w * L;
        const float* r1 = r0 + w * L;
        for (std::int64_t j = 0; j < ow; ++j) {
          for (std::int64_t l = 0; l < L; ++l) {
            const float a = r0[2 * j * L + l], b = r0[(2 * j + 1) * L + l];
            const float c = r1[2 * j * L + l], d = r1[(2 * j + 1) * L + l];
            std::uint8_t k = 0;
            float m = a;
            if (b > m) {
              m = b;
              k = 1;
            }
            if (c > m) {
              m = c;
              k = 2;
            }
            if (d > m) {
              m = d;
              k = 3;
            }
            yp[(i * ow + j) * L + l] = m;
            if (ap) ap[(i * ow + j) * L + l] = k;
          }
        }
      }
    }
    if (training) last_train_n_ = n;
  }

  void backward(std::int64_t n, const float* dy, float* dx) override {
    if (n != last_train_n_)
      throw Error("internal: pooling backward without a matching training forward");
    const std::int64_t planes = n * g_.c / lanes_, h = g_.h, w = g_.w, oh = g_.oh, ow = g_.ow;
    const std::int64_t L = lanes_;
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < planes; ++p) {
      float* dxp = dx + p * h * w * L;
      const float* dyp = dy + p * oh * ow * L;
      const std::uint8_t* ap = argmax_.data() + p * oh * ow * L;
      // Odd trailing rows/columns (floor mode) receive no gradient.
      for (std::int64_t q = 0; q < h * w * L; ++q) dxp[q] = 0.0f;
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j)
          for (std::int64_t l = 0; l < L; ++l) {
            const std::int64_t o = (i * ow + j) * L + l;
            const std::uint8_t k = ap[o];
            dxp[((2 * i + (k >> 1)) * w + 2 * j + (k & 1)) * L + l] = dyp[o];
          }
    }
  }

 private:
  PoolGeom g_;
  std::int64_t lanes_;  // channels side by side per pixel: 1 (plain) or the block
  std::vector<std::uint8_t> argmax_;
  std::int64_t last_train_n_ = -1;
};

class Pool final : public PoolOp {
 public:
  explicit Pool(const PoolGeom& g) : g_(g) {}

  void forward(std::int64_t n, const float* x, float* y, bool training) override {
    auto& p = prims(n);
    set_handle(p.src, x);
    set_handle(p.dst, y);
    if (training) {
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, p.src}, {DNNL_ARG_DST, p.dst}};
      if (g_.kind == PoolKind::max) args.emplace(DNNL_ARG_WORKSPACE, p.ws);
      p.fwd_train.execute(stream(), args);
      last_train_n_ = n;
    } else {
      p.fwd_infer.execute(stream(), {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_DST, p.dst}});
    }
    stream().wait();
  }

  void backward(std::int64_t n, const float* dy, float* dx) override {
    if (n != last_train_n_)
      throw Error("internal: pooling backward without a matching training forward");
    auto& p = prims(n);
    set_handle(p.ddst, dy);
    set_handle(p.dsrc, dx);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, p.ddst},
                                               {DNNL_ARG_DIFF_SRC, p.dsrc}};
    if (g_.kind == PoolKind::max) args.emplace(DNNL_ARG_WORKSPACE, p.ws);
    p.bwd.execute(stream(), args);
    stream().wait();
  }

 private:
  struct Prims {
    dnnl::pooling_forward fwd_train, fwd_infer;
    dnnl::pooling_backward bwd;
    dnnl::memory src, dst, dsrc, ddst, ws;
  };

  Prims& prims(std::int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    using dims = dnnl::memory::dims;
    const auto src = md({n, g_.c, g_.h, g_.w}, activation_tag(g_.block));
    const auto dst = md({n, g_.c, g_.oh, g_.ow}, activation_tag(g_.block));
    const dims strides{g_.stride_h, g_.stride_w}, kernel{g_.kh, g_.kw}, pad{g_.pad_h, g_.pad_w};
    const dims pad_r{(g_.oh - 1) * g_.stride_h + g_.kh - g_.h - g_.pad_h,
                     (g_.ow - 1) * g_.stride_w + g_.kw - g_.w - g_.pad_w};
    const auto alg = g_.kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                              : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_forward::primitive_desc train_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, src, dst, strides,
                                    kernel, pad, pad_r),
        engine());
    dnnl::pooling_forward::primitive_desc infer_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, alg, src, dst, strides,
                                    kernel, pad, pad_r),
        engine());
    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(alg, src, dst, strides, kernel, pad, pad_r), engine(),
        train_pd);
    Prims p{dnnl::pooling_forward(train_pd),
            dnnl::pooling_forward(infer_pd),
            dnnl::pooling_backward(bwd_pd),
            mem(src),
            mem(dst),
            mem(src),
            mem(dst),
            dnnl::memory(train_pd.workspace_desc(), engine())};
    return cache_.emplace(n, std::move(p)).first->second;
  }

  PoolGeom g_;
  std::int64_t last_train_n_ = -1;
  std::map<std::int64_t, Prims> cache_;
};

}  // namespace

std::unique_ptr<PoolOp> make_pool(const PoolGeom& g) {
  check_block(g.block, g.c, "pooling");
  if (g.kind == PoolKind::max && g.kh == 2 && g.kw == 2 && g.stride_h == 2 && g.stride_w == 2 &&
      g.pad_h == 0 && g.pad_w == 0)
    return std::make_unique<MaxPool2x2>(g);
  return std::make_unique<Pool>(g);
}

}  // namespace ddp::backend::cpu
