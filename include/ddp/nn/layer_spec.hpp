#pragma once
// A layer as the configuration describes it, before shapes are known.
#include <cstdint>
#include <string>

namespace ddp::nn {

struct LayerSpec {
  std::string type;  // conv2d | relu | maxpool | avgpool | linear | flatten | dropout | batchnorm
  std::string name;  // unique; defaults to type + ordinal ("conv1", "fc2", ...)
  int line = 0;      // line in the config file, for error messages (0 when built in code)

  std::int64_t out_channels = 0;  // conv2d
  std::int64_t out_features = 0;  // linear
  std::int64_t kernel = 0;        // conv2d, maxpool, avgpool
  std::int64_t stride = 0;        // 0 = default (1 for conv, = kernel for pooling)
  std::int64_t padding = 0;
  bool bias = true;       // conv2d, linear
  float p = 0.5f;         // dropout probability
  float momentum = 0.1f;  // batchnorm running-stat momentum (PyTorch convention)
  float eps = 1e-5f;      // batchnorm
};

}  // namespace ddp::nn
