// Global average pooling: N x C x H x W -> N x C, for any H x W (torchvision's
// AdaptiveAvgPool2d((1, 1)) followed by flatten).
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"

namespace ddp::nn {
namespace {

class GlobalAvgPool final : public UnaryLayer {
 public:
  GlobalAvgPool(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}

  Shape infer(const Shape& in) override {
    if (in.rank() != 3) shape_error(*this, in, "expects an image (channels x height x width)");
    // One window covering the whole image: the backend's average pooling computes the mean.
    g_.kind = backend::PoolKind::avg;
    g_.c = in[0];
    g_.h = g_.kh = g_.stride_h = in[1];
    g_.w = g_.kw = g_.stride_w = in[2];
    g_.pad_h = g_.pad_w = 0;
    g_.oh = g_.ow = 1;
    op_ = be_.pool(g_);
    return Shape{in[0]};
  }
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override {
    op_->forward(x.shape()[0], x.data(), y.data(), ctx.mode == Mode::train);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) override {
    if (dx) op_->backward(x.shape()[0], dy.data(), dx->data());
  }
  bool backward_reads_output() const override { return false; }
  // A blocked input gives a 1x1 blocked output, the same bytes as the plain N x C one.
  LayoutUse layout_use() const override { return LayoutUse::independent; }
  void set_layouts(int in_block, int /*out_block*/) override {
    g_.block = in_block;
    op_ = be_.pool(g_);
  }
  double forward_flops() const override { return static_cast<double>(g_.c * g_.h * g_.w); }

 private:
  backend::Backend& be_;
  backend::PoolGeom g_;
  std::unique_ptr<backend::PoolOp> op_;
};

// Flattened, as our layer's output is [N, C].
void to_onnx(OnnxLayer& g) {
  g.node("GlobalAveragePool", g.inputs(), g.output() + "/pooled");
  g.node("Flatten", {g.output() + "/pooled"}, g.output());
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_global_avgpool() {
  return {{.type = "global_avgpool",
           .family = "gap",
           .doc = "mean over height and width: C x H x W -> C",
           .order = 520,
           .make = make_layer_of<GlobalAvgPool>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
