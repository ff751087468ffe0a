// hardswish: x * relu6(x + 3) / 6 (MobileNetV3; PyTorch's nn.Hardswish), the activation layer of
// activation.hpp on the backend's Activation::hardswish. Its backward reads the input, so it does
// not run in place. ONNX has the operator since opset 14.
#include "activation.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"

namespace ddp::nn::registered {

std::vector<LayerType> layer_types_hardswish() {
  return {{.type = "hardswish",
           .family = "hardswish",
           .doc = "x * relu6(x + 3) / 6 (MobileNetV3)",
           .order = 450,
           .make = make_activation_of<backend::Activation::hardswish>,
           .onnx = [](OnnxLayer& g) { g.node("HardSwish", g.inputs(), g.output()); }}};
}

}  // namespace ddp::nn::registered
