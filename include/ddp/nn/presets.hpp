#pragma once
// The built-in architectures (model.preset): layer lists as a config's [[model.layers]] would give
// them. Specs carry output sizes only: input channels and spatial sizes are inferred from the data
// when the model is built. The ResNets and MobileNetV2 are torchvision's, with its module names.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddp/nn/layer_spec.hpp"

namespace ddp::nn {

// What a preset is built for (the model.* keys and the dataset).
struct PresetOptions {
  std::string stem = "auto";     // model.stem
  std::int64_t image_side = 32;  // the input's larger side, for stem = auto
  bool zero_init_residual = false;
  std::int64_t classes = 10;  // the output layer's size
};

const std::vector<std::string_view>& preset_names();  // lenet, lenet_mnist, ...

// The layers of preset `name`, every one named; throws ConfigError for an unknown name (listing
// the known ones) or an option the preset does not take.
std::vector<LayerSpec> preset_layers(const std::string& name, const PresetOptions& opts = {});

// Why a preset does not take the options asked of it, as {key, problem} ("model.stem",
// "resnet20 is a CIFAR net: ..."); preset "" is a model given by [[model.layers]], which takes
// none.
std::optional<std::pair<std::string, std::string>> preset_option_problem(const std::string& preset,
                                                                         const PresetOptions& opts);

// One line for the start-up output: "resnet18, cifar stem (model.stem = auto: 32x32 inputs)".
std::string preset_description(const std::string& name, const PresetOptions& opts);

}  // namespace ddp::nn
