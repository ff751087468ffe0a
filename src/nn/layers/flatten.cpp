// Flatten: the input reinterpreted as one feature vector per sample (no buffer, no work).
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"

namespace ddp::nn {
namespace {

class Flatten final : public UnaryLayer {
 public:
  Flatten(const LayerSpec& spec, backend::Backend&) : UnaryLayer(spec) {}
  Shape infer(const Shape& in) override { return Shape{in.numel()}; }
  bool is_view() const override { return true; }
  void forward(const Tensor&, const Tensor&, const StepContext&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor*) override {}
};

void to_onnx(OnnxLayer& g) {
  g.node("Flatten", g.inputs(), g.output());
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_flatten() {
  return {{.type = "flatten",
           .family = "flatten",
           .doc = "C x H x W -> C*H*W (a view, no copy)",
           .order = 600,
           .make = make_layer_of<Flatten>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
