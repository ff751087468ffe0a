// Max and average pooling (stride defaults to the window, as in PyTorch).
#include <optional>

#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"
#include "shared_keys.hpp"

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

// An extent as the config writes it: 3, or [3, 1].
std::string config_text(const Extent2& e) {
  if (e.square()) return std::to_string(e.h);
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, its bug 105329) on "[" + ....
  std::string out = "[";
  out += std::to_string(e.h);
  out += ", ";
  out += std::to_string(e.w);
  return out + "]";
}

// PyTorch's rule: a pooling window must overlap the image by at least half.
std::optional<SpecProblem> check(const LayerSpec& s) {
  if (2 * s.padding.h <= s.kernel.h && 2 * s.padding.w <= s.kernel.w) return std::nullopt;
  return SpecProblem{"padding",
                     "padding = " + config_text(s.padding) +
                         ": must be at most kernel / 2 (kernel = " + config_text(s.kernel) + ")"};
}

void to_onnx(OnnxLayer& g) {
  const LayerSpec& s = g.spec();
  const bool avg = s.type == "avgpool";
  std::vector<OnnxAttr> attrs = {{"kernel_shape", onnx_pair(s.kernel)},
                                 {"strides", onnx_pair(s.stride.h > 0 ? s.stride : s.kernel)},
                                 {"pads", onnx_pads(s.padding)},
                                 {"ceil_mode", std::int64_t{0}}};
  // Our average excludes the padding from the count (oneDNN's avg_exclude_padding).
  if (avg) attrs.push_back({"count_include_pad", std::int64_t{0}});
  g.node(avg ? "AveragePool" : "MaxPool", g.inputs(), g.output(), attrs);
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_pool() {
  const std::vector<LayerKeyDef> window = {keys::kernel(), keys::stride(), keys::padding()};
  return {{.type = "maxpool",
           .family = "pool",
           .doc = "maximum over each window",
           .order = 500,
           .keys = window,
           .required = {"kernel"},
           .make = make_layer_of<Pool>,
           .onnx = to_onnx,
           .check = check},
          {.type = "avgpool",
           .family = "pool",
           .doc = "mean over each window (padding excluded)",
           .order = 510,
           .keys = window,
           .required = {"kernel"},
           .make = make_layer_of<Pool>,
           .onnx = to_onnx,
           .check = check}};
}
}  // namespace registered

}  // namespace ddp::nn
