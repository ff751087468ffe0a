// Max and average pooling (stride defaults to the window, as in PyTorch).
#include "layer_util.hpp"
#include "layers.hpp"

namespace ddp::nn {
namespace {

class Pool final : public UnaryLayer {
 public:
  Pool(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}

  Shape infer(const Shape& in) override {
    if (in.rank() != 3) shape_error(*this, in, "expects an image (channels x height x width)");
    g_.kind = spec().type == "avgpool" ? backend::PoolKind::avg : backend::PoolKind::max;
    g_.c = in[0];
    g_.h = in[1];
    g_.w = in[2];
    const auto& k = spec().kernel;
    g_.kh = k.h;
    g_.kw = k.w;
    g_.stride_h = spec().stride.h > 0 ? spec().stride.h : k.h;
    g_.stride_w = spec().stride.w > 0 ? spec().stride.w : k.w;
    g_.pad_h = spec().padding.h;
    g_.pad_w = spec().padding.w;
    if (g_.pad_h * 2 > g_.kh || g_.pad_w * 2 > g_.kw)
      shape_error(*this, in, "padding must be at most half the kernel size");
    if (g_.h + 2 * g_.pad_h < g_.kh || g_.w + 2 * g_.pad_w < g_.kw)
      shape_error(*this, in,
                  "window " + std::to_string(g_.kh) + "x" + std::to_string(g_.kw) +
                      " is larger than the padded input");
    g_.oh = pooled_extent(g_.h, g_.kh, g_.stride_h, g_.pad_h);
    g_.ow = pooled_extent(g_.w, g_.kw, g_.stride_w, g_.pad_w);
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
  LayoutUse layout_use() const override { return LayoutUse::same; }
  void set_layouts(int in_block, int /*out_block: the same*/) override {
    g_.block = in_block;
    op_ = be_.pool(g_);
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
