#pragma once
// A layer as the configuration describes it, before shapes are known.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ddp::nn {

// A height x width pair (kernel, stride, padding, dilation); the config takes an integer for both
// or [h, w].
struct Extent2 {
  std::int64_t h = 0, w = 0;
  constexpr Extent2() = default;
  constexpr Extent2(std::int64_t v) : h(v), w(v) {}  // NOLINT: 3 means 3x3, as in the config
  constexpr Extent2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Extent2&) const = default;
  bool square() const { return h == w; }
};

struct LayerSpec {
  std::string type;  // a type of the layer registry (nn/layer_registry.hpp)
  std::string name;  // unique; defaults to type + ordinal ("conv1", "fc2", ...)
  int line = 0;      // line in the config file, for error messages (0 when built in code)
  std::string file;  // the config file, for error messages ("" when built in code)
  // The layers whose outputs this one takes, by name; empty: the layer written above it (the model
  // input for the first layer). Only layers above may be named, so the file order is a topological
  // order.
  std::vector<std::string> inputs;

  std::int64_t out_channels = 0;  // conv2d
  std::int64_t out_features = 0;  // linear
  Extent2 kernel{0};              // conv2d, maxpool, avgpool
  Extent2 stride{0};              // 0 = default (1 for conv, = kernel for pooling)
  Extent2 padding{0};
  Extent2 dilation{1};      // conv2d
  std::int64_t groups = 1;  // conv2d: channels split into groups (depthwise: groups = channels)
  bool bias = true;         // conv2d, linear
  float p = 0.5f;           // dropout probability
  float momentum = 0.1f;    // batchnorm running-stat momentum (PyTorch convention)
  float eps = 1e-5f;        // batchnorm
  float slope = 0.01f;      // leaky_relu negative slope
  // Parameter initialisation: "" = PyTorch's default for the layer type; "kaiming_normal"
  // (weights N(0, 2/fan_out), bias 0: torchvision's ResNet and MobileNetV2 convolutions);
  // "normal" (weights N(0, 0.01^2), bias 0: MobileNetV2's classifier); "zeros" (batchnorm weight 0:
  // zero_init_residual); conv2d only: "dirac", "partial_dirac", "patch_whitening" (nn::Init).
  std::string init;
};

// The LayerSpec field a [[model.layers]] key is stored in (nn/layer_registry.hpp's LayerKeyDef);
// the pointer's type is the key's value type.
using LayerField =
    std::variant<std::int64_t*, float*, bool*, std::string*, Extent2*, std::vector<std::string>*>;

// "model.layers[3] (linear 'fc1')": how errors name a layer of the configuration.
std::string layer_label(std::size_t index, const LayerSpec& spec);

}  // namespace ddp::nn
