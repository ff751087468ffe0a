// Element-wise sum of two or more inputs of equal shape (the residual connection).
#include <optional>

#include "ddp/nn/activation_fusion.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"

namespace ddp::nn {
namespace {

class Add final : public Layer, public FusesActivation {
 public:
  Add(const LayerSpec& spec, backend::Backend& be) : Layer(spec), be_(be) {}
  std::size_t min_inputs() const override { return 2; }
  std::size_t max_inputs() const override { return SIZE_MAX; }

  Shape infer(std::span<const Shape> in) override {
    for (std::size_t k = 1; k < in.size(); ++k)
      if (in[k] != in[0]) inputs_error(*this, in, "add needs inputs of equal shape");
    return in[0];
  }
  // In place (GraphPlan::storage), y is one of the inputs: the others are added to it, and its
  // gradient is the output gradient already. A fused activation is applied with the last input.
  void forward(std::span<const Tensor> xs, const Tensor& y, const StepContext&) override {
    std::size_t first = 0;
    for (std::size_t k = 0; k < xs.size(); ++k)
      if (xs[k].data() == y.data()) first = k;
    if (xs[first].data() != y.data()) be_.copy(y.numel(), xs[first].data(), y.data());
    const std::size_t last = first + 1 == xs.size() ? first - 1 : xs.size() - 1;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      if (k == first) continue;
      if (act_ && k == last)
        be_.add_activation(*act_, y.numel(), xs[k].data(), y.data());
      else
        be_.add(y.numel(), xs[k].data(), y.data());
    }
  }
  // Every input's gradient is dy, masked by a fused activation (from the output, y = act(sum)):
  // masked once, in place where an input gradient is dy's buffer, and copied to the others.
  void backward(std::span<const Tensor>, const Tensor& y, const Tensor& dy,
                std::span<const Tensor* const> dxs) override {
    const float* g = dy.data();
    if (act_) {
      const Tensor* masked = nullptr;
      for (const Tensor* dx : dxs)
        if (dx && (!masked || dx->data() == dy.data())) masked = dx;
      if (!masked) return;
      be_.activation_backward(*act_, 0.0f, dy.numel(), nullptr, y.data(), dy.data(),
                              masked->data());
      g = masked->data();
    }
    for (const Tensor* dx : dxs)
      if (dx && dx->data() != g) be_.copy(dy.numel(), g, dx->data());
  }
  bool can_run_in_place() const override { return true; }
  // Fused, backward reads the output: the activation's, which keeps the buffer as its own
  // backward_reads_output does.
  bool backward_reads_output() const override { return act_.has_value(); }
  LayoutUse layout_use() const override { return LayoutUse::elementwise; }
  bool fuse_activation(backend::Activation kind) override {
    if (!be_.add_fuses(kind)) return false;
    act_ = kind;
    return true;
  }

 private:
  backend::Backend& be_;
  std::optional<backend::Activation> act_;  // applied to the sum (nn/activation_fusion.hpp)
};

void to_onnx(OnnxLayer& g) {
  g.node("Sum", g.inputs(), g.output());
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_add() {
  return {{.type = "add",
           .family = "add",
           .doc = "element-wise sum of two or more inputs of equal shape (inputs = [...])",
           .order = 800,
           .make = make_layer_of<Add>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
