// Built-in architectures. Specs carry output sizes only: input channels and spatial sizes are
// inferred from the data when the model is built.
#include <functional>

#include "ddp/app/config.hpp"
#include "ddp/app/config_detail.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

nn::LayerSpec conv(std::int64_t out_channels, std::int64_t kernel, std::int64_t padding = 0) {
  nn::LayerSpec s;
  s.type = "conv2d";
  s.out_channels = out_channels;
  s.kernel = kernel;
  s.padding = padding;
  return s;
}

nn::LayerSpec linear(std::int64_t out_features) {
  nn::LayerSpec s;
  s.type = "linear";
  s.out_features = out_features;
  return s;
}

nn::LayerSpec maxpool(std::int64_t kernel) {
  nn::LayerSpec s;
  s.type = "maxpool";
  s.kernel = kernel;
  return s;
}

nn::LayerSpec plain(const char* type) {
  nn::LayerSpec s;
  s.type = type;
  return s;
}

// LeCun et al. 1998 as in the PyTorch CIFAR-10 tutorial; `first_padding` 2 keeps 28x28 inputs at
// the 32x32 geometry the rest of the network expects.
std::vector<nn::LayerSpec> lenet(std::int64_t first_padding) {
  return {conv(6, 5, first_padding),
          plain("relu"),
          maxpool(2),
          conv(16, 5),
          plain("relu"),
          maxpool(2),
          plain("flatten"),
          linear(120),
          plain("relu"),
          linear(84),
          plain("relu"),
          linear(10)};
}

// Two VGG blocks (3x3 convolutions that keep the size, then 2x2 pooling) and a classifier;
// `batchnorm` puts a batch normalisation between each convolution and its ReLU.
std::vector<nn::LayerSpec> vgg_small(bool batchnorm) {
  std::vector<nn::LayerSpec> layers;
  for (std::int64_t channels : {32, 64}) {
    layers.push_back(conv(channels, 3, 1));
    if (batchnorm) layers.push_back(plain("batchnorm"));
    layers.push_back(plain("relu"));
    layers.push_back(maxpool(2));
  }
  for (auto s : {plain("flatten"), linear(512), plain("relu"), linear(10)}) layers.push_back(s);
  return layers;
}

struct Preset {
  std::string_view name;
  std::function<std::vector<nn::LayerSpec>()> build;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"lenet", [] { return lenet(0); }},
      {"lenet_mnist", [] { return lenet(2); }},
      {"vgg_small", [] { return vgg_small(false); }},
      {"vgg_small_bn", [] { return vgg_small(true); }},
  };
  return table;
}

}  // namespace

const std::vector<std::string_view>& preset_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& p : presets()) out.push_back(p.name);
    return out;
  }();
  return names;
}

std::vector<nn::LayerSpec> preset_layers(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.name == name) {
      auto layers = p.build();
      detail::assign_default_layer_names(layers);
      return layers;
    }
  }
  std::string known;
  for (auto n : preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
  std::vector<std::string> candidates(preset_names().begin(), preset_names().end());
  throw ConfigError("unknown model preset '" + name + "' (known presets: " + known + ")" +
                    detail::did_you_mean(name, candidates));
}

}  // namespace ddp::app
