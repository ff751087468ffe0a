// Max and average pooling (square window; stride defaults to the window, as in PyTorch).
#include "layer_util.hpp"
#include "layers.hpp"

namespace ddp::nn {
namespace {

class Pool final : public Layer {
 public:
  Pool(const LayerSpec& spec, backend::Backend& be) : Layer(spec), be_(be) {}

  Shape infer(const Shape& in) override {
    if (in.rank() != 3) shape_error(*this, in, "expects an image (channels x height x width)");
    g_.kind = spec().type == "avgpool" ? backend::PoolKind::avg : backend::PoolKind::max;
    g_.c = in[0];
    g_.h = in[1];
    g_.w = in[2];
    const LayerSpec& sp = spec();
    // The pooling kernels take one stride and one padding for both axes.
    if (sp.kernel.h != sp.kernel.w || sp.stride.h != sp.stride.w || sp.padding.h != sp.padding.w)
      shape_error(*this, in,
                  "pooling takes a square window: kernel, stride and padding equal in "
                  "height and width");
    g_.kh = g_.kw = sp.kernel.h;
    g_.stride = sp.stride.h > 0 ? sp.stride.h : sp.kernel.h;
    g_.pad = sp.padding.h;
    if (g_.pad * 2 > g_.kh) shape_error(*this, in, "padding must be at most half the kernel size");
    if (g_.h + 2 * g_.pad < g_.kh || g_.w + 2 * g_.pad < g_.kw)
      shape_error(*this, in, "window " + std::to_string(g_.kh) + " is larger than the input");
    g_.oh = pooled_extent(g_.h, g_.kh, g_.stride, g_.pad);
    g_.ow = pooled_extent(g_.w, g_.kw, g_.stride, g_.pad);
    op_ = be_.pool(g_);
    return Shape{g_.c, g_.oh, g_.ow};
  }
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override {
    op_->forward(x.shape()[0], x.data(), y.data(), ctx.mode == Mode::train);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) override {
    if (dx) op_->backward(x.shape()[0], dy.data(), dx->data());
  }
  double forward_flops() const override {
    return static_cast<double>(g_.c * g_.oh * g_.ow * g_.kh * g_.kw);
  }

 private:
  backend::Backend& be_;
  backend::PoolGeom g_;
  std::unique_ptr<backend::PoolOp> op_;
};

}  // namespace

std::unique_ptr<Layer> make_pool(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<Pool>(spec, be);
}

}  // namespace ddp::nn
