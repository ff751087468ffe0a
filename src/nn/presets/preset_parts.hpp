#pragma once
// Building blocks of the built-in architectures (this directory): layer specs written the way
// torchvision writes its modules, and the family builders. Private to src/nn/presets.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/nn/layer_spec.hpp"
#include "ddp/nn/presets.hpp"

namespace ddp::nn::preset {

// A convolution as torchvision's ResNet and MobileNetV2 have them: no bias, Kaiming-normal
// (fan-out) weights.
inline LayerSpec conv(std::string name, std::int64_t out_channels, std::int64_t kernel,
                      std::int64_t stride, std::int64_t padding, std::int64_t groups = 1) {
  LayerSpec s;
  s.type = "conv2d";
  s.name = std::move(name);
  s.out_channels = out_channels;
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.groups = groups;
  s.bias = false;
  s.init = "kaiming_normal";
  return s;
}

// Batch norm with weight 1 and bias 0, or weight 0 (zero_init_residual).
inline LayerSpec batchnorm(std::string name, bool zero_weight = false) {
  LayerSpec s;
  s.type = "batchnorm";
  s.name = std::move(name);
  if (zero_weight) s.init = "zeros";
  return s;
}

// A layer without keys (relu, relu6, add, global_avgpool, ...); no inputs: the layer above.
inline LayerSpec layer(std::string type, std::string name, std::vector<std::string> inputs = {}) {
  LayerSpec s;
  s.type = std::move(type);
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  return s;
}

// "cifar" or "imagenet": the stem that opts ask for (auto: cifar for images of at most 64 px).
std::string stem_of(const PresetOptions& opts);

// torchvision's ResNet: blocks per stage (4 stages of 64, 128, 256, 512 planes), BasicBlock
// (expansion 1) or Bottleneck (expansion 4, stride on the 3x3: v1.5).
enum class Block { basic, bottleneck };
std::vector<LayerSpec> resnet(Block block, const std::vector<int>& blocks,
                              const PresetOptions& opts);
// He et al. 2016's CIFAR ResNet-(6n+2): 3 stages of 16, 32, 64 planes of n BasicBlocks, projection
// shortcuts (1x1 convolution + batch norm) where the shape changes.
std::vector<LayerSpec> cifar_resnet(int n, const PresetOptions& opts);
// torchvision's MobileNetV2 (width 1.0).
std::vector<LayerSpec> mobilenet_v2(const PresetOptions& opts);

}  // namespace ddp::nn::preset
