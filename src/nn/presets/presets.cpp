// The table of built-in architectures (nn/presets.hpp), LeNet and the small VGG nets; the ResNets
// and MobileNetV2 are torchvision's (resnet.cpp, mobilenet.cpp).
#include "ddp/nn/presets.hpp"

#include <functional>
#include <optional>
#include <utility>

#include "ddp/error.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "preset_parts.hpp"

namespace ddp::nn {
namespace {

LayerSpec conv(std::int64_t out_channels, std::int64_t kernel, std::int64_t padding = 0) {
  LayerSpec s;
  s.type = "conv2d";
  s.out_channels = out_channels;
  s.kernel = kernel;
  s.padding = padding;
  return s;
}

LayerSpec linear(std::int64_t out_features) {
  LayerSpec s;
  s.type = "linear";
  s.out_features = out_features;
  return s;
}

LayerSpec maxpool(std::int64_t kernel) {
  LayerSpec s;
  s.type = "maxpool";
  s.kernel = kernel;
  return s;
}

LayerSpec plain(const char* type) {
  LayerSpec s;
  s.type = type;
  return s;
}

// LeCun et al. 1998 as in the PyTorch CIFAR-10 tutorial; `first_padding` 2 keeps 28x28 inputs at
// the 32x32 geometry the rest of the network expects.
std::vector<LayerSpec> lenet(std::int64_t first_padding, std::int64_t classes) {
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
          linear(classes)};
}

// Two VGG blocks (3x3 convolutions that keep the size, then 2x2 pooling) and a classifier;
// `batchnorm` puts a batch normalisation between each convolution and its ReLU.
std::vector<LayerSpec> vgg_small(bool batchnorm, std::int64_t classes) {
  std::vector<LayerSpec> layers;
  for (std::int64_t channels : {32, 64}) {
    layers.push_back(conv(channels, 3, 1));
    if (batchnorm) layers.push_back(plain("batchnorm"));
    layers.push_back(plain("relu"));
    layers.push_back(maxpool(2));
  }
  for (auto s : {plain("flatten"), linear(512), plain("relu"), linear(classes)})
    layers.push_back(s);
  return layers;
}

// What a preset takes besides the class count.
enum class Stem { none, choice, cifar };  // no stem to adapt | model.stem picks | always CIFAR

struct Preset {
  std::string_view name;
  std::function<std::vector<LayerSpec>(const PresetOptions&)> build;
  Stem stem = Stem::none;
  bool residual = false;  // has residual blocks (model.zero_init_residual)
};

const std::vector<Preset>& presets() {
  using preset::Block;
  static const std::vector<Preset> table = {
      {"lenet", [](const PresetOptions& o) { return lenet(0, o.classes); }},
      {"lenet_mnist", [](const PresetOptions& o) { return lenet(2, o.classes); }},
      {"vgg_small", [](const PresetOptions& o) { return vgg_small(false, o.classes); }},
      {"vgg_small_bn", [](const PresetOptions& o) { return vgg_small(true, o.classes); }},
      {"resnet20", [](const PresetOptions& o) { return preset::cifar_resnet(3, o); }, Stem::cifar,
       true},
      {"resnet56", [](const PresetOptions& o) { return preset::cifar_resnet(9, o); }, Stem::cifar,
       true},
      {"resnet18",
       [](const PresetOptions& o) {
         return preset::resnet(Block::basic, {2, 2, 2, 2}, o);
       },
       Stem::choice, true},
      {"resnet34",
       [](const PresetOptions& o) {
         return preset::resnet(Block::basic, {3, 4, 6, 3}, o);
       },
       Stem::choice, true},
      {"resnet50",
       [](const PresetOptions& o) {
         return preset::resnet(Block::bottleneck, {3, 4, 6, 3}, o);
       },
       Stem::choice, true},
      {"mobilenet_v2", preset::mobilenet_v2, Stem::choice, false},
  };
  return table;
}

const Preset* find_preset(std::string_view name) {
  for (const auto& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string names_where(bool (*pred)(const Preset&)) {
  std::string out;
  for (const auto& p : presets())
    if (pred(p)) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
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

std::string preset::stem_of(const PresetOptions& opts) {
  if (opts.stem != "auto") return opts.stem;
  return opts.image_side <= 64 ? "cifar" : "imagenet";
}

std::optional<std::pair<std::string, std::string>> preset_option_problem(
    const std::string& name, const PresetOptions& opts) {
  const Preset* p = find_preset(name);
  const std::string model = p ? "model.preset = " + name : "a model given by [[model.layers]]";
  const Stem stem = p ? p->stem : Stem::none;
  if (opts.stem != "auto" && stem == Stem::none) {
    return std::pair{"model.stem", "applies to the presets " + names_where([](const Preset& q) {
                                     return q.stem == Stem::choice;
                                   }) + ", not to " +
                                       model + "; leave it at auto"};
  }
  if (opts.stem == "imagenet" && stem == Stem::cifar) {
    return std::pair{"model.stem", name +
                                       " is a CIFAR net (He et al. 2016): its stem is always a "
                                       "3x3 stride-1 convolution; leave model.stem at auto (or "
                                       "cifar), or use resnet18/34/50 for the imagenet stem"};
  }
  if (opts.zero_init_residual && !(p && p->residual)) {
    return std::pair{"model.zero_init_residual",
                     "applies to the presets with residual blocks (" +
                         names_where([](const Preset& q) { return q.residual; }) + "), not to " +
                         model};
  }
  return std::nullopt;
}

std::vector<LayerSpec> preset_layers(const std::string& name, const PresetOptions& opts) {
  if (const Preset* p = find_preset(name)) {
    if (auto problem = preset_option_problem(name, opts))
      throw ConfigError(problem->first + ": " + problem->second);
    auto layers = p->build(opts);
    assign_default_names(layers);
    return layers;
  }
  // The config's model.preset is checked against preset_names() before it comes here (with a
  // "did you mean"); this is for callers in code (the benchmarks' model names).
  std::string known;
  for (auto n : preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
  throw ConfigError("unknown model preset '" + name + "' (known presets: " + known + ")");
}

std::string preset_description(const std::string& name, const PresetOptions& opts) {
  const Preset* p = find_preset(name);
  if (!p) return "";
  std::string out = name;
  if (p->stem != Stem::none) {
    const std::string stem = p->stem == Stem::cifar ? "cifar" : preset::stem_of(opts);
    out += ", " + stem + " stem";
    if (p->stem == Stem::cifar) {
      out += " (a CIFAR net)";
    } else if (opts.stem == "auto") {
      const auto side = std::to_string(opts.image_side);
      out += " (model.stem = auto: " + side + "x" + side + " images are " +
             (stem == "cifar" ? "at most" : "larger than") + " 64 px)";
    }
  }
  if (opts.zero_init_residual) out += ", zero_init_residual";
  return out + ", " + std::to_string(opts.classes) + " classes";
}

}  // namespace ddp::nn
