// Element-wise activations: relu, relu6, leaky_relu, gelu, silu. One layer parameterised by the
// kind; the backend holds the arithmetic.
#include "ddp/nn/activation_fusion.hpp"
#include "layer_util.hpp"
#include "layers.hpp"

namespace ddp::nn {
namespace {

using backend::Activation;

Activation kind_of(const LayerSpec& spec) {
  const std::string& t = spec.type;
  if (t == "relu") return Activation::relu;
  if (t == "relu6") return Activation::relu6;
  if (t == "leaky_relu") return Activation::leaky_relu;
  if (t == "gelu") return Activation::gelu;
  if (t == "silu") return Activation::silu;
  throw Error("internal: layer '" + spec.name + "' of type '" + t + "' is not an activation");
}

class ActivationLayer final : public UnaryLayer, public FusableActivation {
 public:
  ActivationLayer(const LayerSpec& spec, backend::Backend& be)
      : UnaryLayer(spec), be_(be), kind_(kind_of(spec)) {
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
  // The relu family's backward reads only the output: they may run in place. gelu and silu read
  // their input instead, so the output is theirs to lose.
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

}  // namespace

std::unique_ptr<Layer> make_activation(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<ActivationLayer>(spec, be);
}
std::unique_ptr<Layer> make_relu(const LayerSpec& spec, backend::Backend& be) {
  return make_activation(spec, be);
}

}  // namespace ddp::nn
