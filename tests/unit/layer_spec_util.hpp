#pragma once
// A one-line layer spec for tests: L("conv2d", "conv1", out_channels, kernel, padding),
// L("linear", "fc", out_features), L("maxpool", "pool", 0, kernel).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ddp/nn/layer_spec.hpp"

namespace ddp::testutil {

inline nn::LayerSpec L(std::string type, std::string name, std::int64_t a = 0, std::int64_t k = 0,
                       std::int64_t pad = 0) {
  nn::LayerSpec s;
  s.type = std::move(type);
  s.name = std::move(name);
  if (s.type == "conv2d") s.out_channels = a;
  if (s.type == "linear") s.out_features = a;
  s.kernel = k;
  s.padding = pad;
  return s;
}

// The spec reading the named layers' outputs (graph models: residual adds, concat).
inline nn::LayerSpec reads(nn::LayerSpec s, std::vector<std::string> inputs) {
  s.inputs = std::move(inputs);
  return s;
}

// conv-bn-relu-pool, then two linear layers: a small model with every kind of parameter.
inline std::vector<nn::LayerSpec> small_net() {
  return {L("conv2d", "conv1", 3, 3, 1),
          L("batchnorm", "bn1"),
          L("relu", "relu1"),
          L("maxpool", "pool1", 0, 2),
          L("flatten", "flat"),
          L("linear", "fc1", 5),
          L("relu", "relu2"),
          L("linear", "fc2", 4)};
}

}  // namespace ddp::testutil
