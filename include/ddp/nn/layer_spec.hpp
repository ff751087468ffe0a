#pragma once
// A layer as the configuration describes it, before shapes are known.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::nn {

// A height x width pair (kernel, stride, padding, dilation); one integer means both.
struct Extent2 {
  std::int64_t h = 0, w = 0;
  constexpr Extent2() = default;
  constexpr Extent2(std::int64_t v) : h(v), w(v) {}
  constexpr Extent2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Extent2&) const = default;
};

struct LayerSpec {
  std::string type;  // conv2d | relu | relu6 | leaky_relu | gelu | silu | maxpool | avgpool |
                     // linear | flatten | dropout | batchnorm
  std::string name;  // unique; defaults to type + ordinal ("conv1", "fc2", ...)
  int line = 0;      // line in the config file, for error messages (0 when built in code)

  std::int64_t out_channels = 0;  // conv2d
  std::int64_t out_features = 0;  // linear
  Extent2 kernel{0};              // conv2d, maxpool, avgpool
  Extent2 stride{0};              // 0 = default (1 for conv, = kernel for pooling)
  Extent2 padding{0};
  Extent2 dilation{1};      // conv2d
  std::int64_t groups = 1;  // conv2d: channels in `groups` independent parts
  bool bias = true;         // conv2d, linear
  float p = 0.5f;           // dropout probability
  float momentum = 0.1f;    // batchnorm running-stat momentum (PyTorch convention)
  float eps = 1e-5f;        // batchnorm
  float slope = 0.01f;      // leaky_relu
  std::vector<std::string> inputs;
  std::string init;
};

}  // namespace ddp::nn
