// 2-D convolution layer: weight [out, in / groups, kh, kw] (PyTorch's layout), optional bias [out];
// per-axis kernel, stride, padding and dilation.
#include <cmath>

#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"
#include "shared_keys.hpp"

namespace ddp::nn {
namespace {

class Conv2d final : public UnaryLayer {
 public:
  Conv2d(const LayerSpec& spec, backend::Backend& be);
  Shape infer(const Shape& in) override;
  std::vector<ParamSpec> param_specs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
            const std::vector<Tensor>& buffers) override;
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
  double forward_flops() const override;
  bool backward_reads_output() const override { return false; }
  LayoutUse layout_use() const override { return LayoutUse::independent; }
  void set_layouts(int in_block, int out_block) override {
    g_.src_block = in_block;
    g_.dst_block = out_block;
    op_ = be_.conv(g_);
  }

 private:
  backend::Backend& be_;
  backend::ConvGeom g_;
  std::unique_ptr<backend::ConvOp> op_;
  Tensor w_, b_, dw_, db_;
};

Conv2d::Conv2d(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}

Shape Conv2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error(*this, in, "expects an image (channels x height x width)");
  const LayerSpec& sp = spec();
  auto str = [](std::int64_t v) { return std::to_string(v); };
  if (sp.groups < 1 || sp.dilation.h < 1 || sp.dilation.w < 1)
    throw ConfigError("model: " + describe(*this) + ": groups = " + str(sp.groups) +
                      " and dilation = " + str(sp.dilation.h) + "x" + str(sp.dilation.w) +
                      " must be at least 1");
  g_.c = in[0];
  g_.h = in[1];
  g_.w = in[2];
  g_.k = sp.out_channels;
  g_.r = sp.kernel.h;
  g_.s = sp.kernel.w;
  g_.stride_h = sp.stride.h > 0 ? sp.stride.h : 1;
  g_.stride_w = sp.stride.w > 0 ? sp.stride.w : 1;
  g_.pad_h = sp.padding.h;
  g_.pad_w = sp.padding.w;
  g_.dil_h = sp.dilation.h;
  g_.dil_w = sp.dilation.w;
  g_.groups = sp.groups;
  g_.bias = sp.bias;
  if (g_.k % g_.groups != 0)
    throw ConfigError("model: " + describe(*this) + ": out_channels = " + str(g_.k) +
                      " is not divisible by groups = " + str(g_.groups));
  if (g_.c % g_.groups != 0)
    shape_error(*this, in,
                "its " + str(g_.c) + " channels are not divisible by groups = " + str(g_.groups));
  // The extent a dilated kernel spans.
  const std::int64_t span_h = (g_.r - 1) * g_.dil_h + 1, span_w = (g_.s - 1) * g_.dil_w + 1;
  if (g_.h + 2 * g_.pad_h < span_h || g_.w + 2 * g_.pad_w < span_w) {
    std::string kernel = "kernel " + str(g_.r) + "x" + str(g_.s);
    if (g_.dil_h > 1 || g_.dil_w > 1)
      kernel += " (dilation " + str(g_.dil_h) + "x" + str(g_.dil_w) + ": spans " + str(span_h) +
                "x" + str(span_w) + ")";
    shape_error(*this, in,
                kernel + " is larger than the padded input " + str(g_.h + 2 * g_.pad_h) + "x" +
                    str(g_.w + 2 * g_.pad_w));
  }
  g_.oh = pooled_extent(g_.h, span_h, g_.stride_h, g_.pad_h);
  g_.ow = pooled_extent(g_.w, span_w, g_.stride_w, g_.pad_w);
  op_ = be_.conv(g_);
  return Shape{g_.k, g_.oh, g_.ow};
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  const std::int64_t fan_in = (g_.c / g_.groups) * g_.r * g_.s;
  // PyTorch's fan-out of a [out, in/groups, kh, kw] weight: out x kh x kw (groups do not divide).
  const std::int64_t fan_out = g_.k * g_.r * g_.s;
  std::vector<ParamSpec> p{{"weight", Shape{g_.k, g_.c / g_.groups, g_.r, g_.s},
                            init_weight(spec(), Init::uniform_fan_in), fan_in, fan_out, g_.groups}};
  if (g_.bias)
    p.push_back({"bias", Shape{g_.k}, init_bias(spec(), Init::uniform_fan_in), fan_in, fan_out});
  return p;
}

void Conv2d::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>&) {
  w_ = params.at(0);
  dw_ = grads.at(0);
  if (g_.bias) {
    b_ = params.at(1);
    db_ = grads.at(1);
  }
}

void Conv2d::forward(const Tensor& x, const Tensor& y, const StepContext&) {
  op_->forward(x.shape()[0], x.data(), w_.data(), b_.data(), y.data());
}

void Conv2d::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  op_->backward(x.shape()[0], x.data(), w_.data(), dy.data(), dx ? dx->data() : nullptr, dw_.data(),
                db_.data());
}

double Conv2d::forward_flops() const {
  return 2.0 * static_cast<double>(g_.k * g_.oh * g_.ow * (g_.c / g_.groups) * g_.r * g_.s);
}

void conv2d_to_onnx(OnnxLayer& g) {
  const LayerSpec& s = g.spec();
  std::vector<std::string> in = g.inputs();
  in.push_back(g.weight("weight"));
  if (const auto bias = g.weight("bias"); !bias.empty()) in.push_back(bias);
  g.node("Conv", in, g.output(),
         {{"kernel_shape", onnx_pair(s.kernel)},
          {"strides", onnx_pair(s.stride.h > 0 ? s.stride : Extent2{1})},
          {"pads", onnx_pads(s.padding)},
          {"dilations", onnx_pair(s.dilation)},
          {"group", s.groups}});
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_conv2d() {
  return {{.type = "conv2d",
           .family = "conv",
           .doc = "2-D convolution (weight [out, in/groups, kh, kw], optional bias)",
           .order = 100,
           .keys = {{DDP_SPEC_FIELD(out_channels), .help = "output channels", .range = {.lo = 1}},
                    keys::kernel(),
                    keys::stride(),
                    keys::padding(),
                    {DDP_SPEC_FIELD(dilation),
                     .help = "spacing of the kernel taps, integer or [h, w]", .range = {.lo = 1}},
                    {DDP_SPEC_FIELD(groups),
                     .help = "channel groups (in and out channels divisible by it; depthwise: = "
                             "channels)",
                     .range = {.lo = 1}},
                    keys::bias(),
                    keys::init()},
           .required = {"out_channels", "kernel"},
           .make = make_layer_of<Conv2d>,
           .onnx = conv2d_to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
