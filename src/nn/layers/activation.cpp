// Element-wise activations: the layer class (activation.hpp), and the types relu, relu6,
// leaky_relu, gelu and silu. Newer activations register in files of their own (hardswish.cpp).
#include "activation.hpp"

#include <cmath>

#include "ddp/nn/activation_fusion.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"

namespace ddp::nn {
namespace {

using backend::Activation;

class ActivationLayer final : public UnaryLayer, public FusableActivation {
 public:
  ActivationLayer(const LayerSpec& spec, backend::Backend& be, Activation kind)
      : UnaryLayer(spec), be_(be), kind_(kind) {
    if (kind_ == Activation::leaky_relu) alpha_ = spec.slope;
  }
  Shape infer(const Shape& in) override {
    // Backward reads only the output, which tells the sign of the input only for a slope >= 0
    // (PyTorch refuses in-place leaky_relu with a negative slope for the same reason).
    if (!(alpha_ >= 0.0f))
      throw ConfigError("model: " + describe(*this) + ": slope = " + std::to_string(alpha_) +
                        " must be >= 0");
    return in;
  }
  // The relu family's backward reads only the output: they may run in place. The others (gelu,
  // silu, ...) read their input instead, so the output is theirs to lose.
  bool can_run_in_place() const override { return backend::backward_uses_output(kind_); }
  // Still true when fused: the layer below reads this output (its own) in backward, and this is
  // what keeps later layers from running in place over it.
  bool backward_reads_output() const override { return backend::backward_uses_output(kind_); }
  LayoutUse layout_use() const override { return LayoutUse::elementwise; }
  void forward(const Tensor& x, const Tensor& y, const StepContext&) override {
    if (!fused_) be_.activation_forward(kind_, alpha_, x.numel(), x.data(), y.data());
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override {
    if (dx && !fused_)
      be_.activation_backward(kind_, alpha_, dy.numel(), x.data(), y.data(), dy.data(), dx->data());
  }
  Activation activation_kind() const override { return kind_; }
  void set_fused() override { fused_ = true; }

 private:
  backend::Backend& be_;
  Activation kind_;
  float alpha_ = 0.0f;
  bool fused_ = false;  // the layer below applies it (nn/activation_fusion.hpp)
};

// The ONNX forms. gelu is the exact form, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): opset 17 has
// no Gelu yet.
void relu_onnx(OnnxLayer& g) {
  g.node("Relu", g.inputs(), g.output());
}
void relu6_onnx(OnnxLayer& g) {
  const std::string& out = g.output();
  g.node("Clip", {g.inputs()[0], g.scalar(out + "/min", 0.0f), g.scalar(out + "/max", 6.0f)}, out);
}
void leaky_relu_onnx(OnnxLayer& g) {
  g.node("LeakyRelu", g.inputs(), g.output(), {{"alpha", g.spec().slope}});
}
void gelu_onnx(OnnxLayer& g) {
  const std::string& x = g.inputs()[0];
  const std::string& out = g.output();
  g.node("Div", {x, g.scalar(out + "/sqrt2", static_cast<float>(std::sqrt(2.0)))}, out + "/scaled");
  g.node("Erf", {out + "/scaled"}, out + "/erf");
  g.node("Add", {out + "/erf", g.scalar(out + "/one", 1.0f)}, out + "/one_plus");
  g.node("Mul", {x, out + "/one_plus"}, out + "/x_one_plus");
  g.node("Mul", {out + "/x_one_plus", g.scalar(out + "/half", 0.5f)}, out);
}
void silu_onnx(OnnxLayer& g) {
  const std::string& out = g.output();
  g.node("Sigmoid", g.inputs(), out + "/sigmoid");
  g.node("Mul", {g.inputs()[0], out + "/sigmoid"}, out);
}

}  // namespace

std::unique_ptr<Layer> make_activation(const LayerSpec& spec, backend::Backend& be,
                                       backend::Activation kind) {
  return std::make_unique<ActivationLayer>(spec, be, kind);
}

namespace registered {
std::vector<LayerType> layer_types_activation() {
  return {{.type = "relu",
           .family = "relu",
           .doc = "max(x, 0)",
           .order = 400,
           .make = make_activation_of<Activation::relu>,
           .onnx = relu_onnx},
          {.type = "relu6",
           .family = "relu",
           .doc = "min(max(x, 0), 6) (MobileNetV2)",
           .order = 410,
           .make = make_activation_of<Activation::relu6>,
           .onnx = relu6_onnx},
          {.type = "leaky_relu",
           .family = "relu",
           .doc = "x if x > 0 else slope * x",
           .order = 420,
           .keys = {{DDP_SPEC_FIELD(slope), .help = "negative slope", .range = {.lo = 0.0}}},
           .make = make_activation_of<Activation::leaky_relu>,
           .onnx = leaky_relu_onnx},
          {.type = "gelu",
           .family = "gelu",
           .doc = "x * Phi(x), the exact (erf) form, PyTorch's default",
           .order = 430,
           .make = make_activation_of<Activation::gelu>,
           .onnx = gelu_onnx},
          {.type = "silu",
           .family = "silu",
           .doc = "x * sigmoid(x) (swish)",
           .order = 440,
           .make = make_activation_of<Activation::silu>,
           .onnx = silu_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
