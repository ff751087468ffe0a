// ResNets as torchvision 0.14 builds them (torchvision/models/resnet.py), and He et al. 2016's
// CIFAR ResNets in the same style. Layers carry torchvision's module names, so their parameters are
// its state_dict keys ("layer1.0.conv1.weight", "layer2.0.downsample.1.running_mean", "fc.bias").
// Parameter-free layers get names of their own: "layer1.0.relu" (after bn1; torchvision reuses one
// ReLU module), "layer1.0.add" (the residual sum) and "layer1.0" (the block's output, its ReLU).
#include "preset_parts.hpp"

namespace ddp::nn::preset {
namespace {

constexpr std::int64_t expansion(Block b) {
  return b == Block::bottleneck ? 4 : 1;
}

// Appends one residual block named `p` ("layer2.0") reading the layer above; `inplanes` are its
// input channels.
void add_block(std::vector<LayerSpec>& L, const std::string& p, Block kind, std::int64_t inplanes,
               std::int64_t planes, std::int64_t stride, bool zero_last) {
  const std::string in = L.back().name;
  const std::int64_t out = planes * expansion(kind);
  if (kind == Block::basic) {
    L.push_back(conv(p + ".conv1", planes, 3, stride, 1));
    L.push_back(batchnorm(p + ".bn1"));
    L.push_back(layer("relu", p + ".relu"));
    L.push_back(conv(p + ".conv2", planes, 3, 1, 1));
    L.push_back(batchnorm(p + ".bn2", zero_last));
  } else {
    L.push_back(conv(p + ".conv1", planes, 1, 1, 0));
    L.push_back(batchnorm(p + ".bn1"));
    L.push_back(layer("relu", p + ".relu1"));
    L.push_back(conv(p + ".conv2", planes, 3, stride, 1));  // v1.5: the stride is here
    L.push_back(batchnorm(p + ".bn2"));
    L.push_back(layer("relu", p + ".relu2"));
    L.push_back(conv(p + ".conv3", out, 1, 1, 0));
    L.push_back(batchnorm(p + ".bn3", zero_last));
  }
  const std::string residual = L.back().name;
  std::string shortcut = in;
  if (stride != 1 || inplanes != out) {
    auto projection = conv(p + ".downsample.0", out, 1, stride, 0);
    projection.inputs = {in};
    L.push_back(projection);
    L.push_back(batchnorm(p + ".downsample.1"));
    shortcut = L.back().name;
  }
  L.push_back(layer("add", p + ".add", {residual, shortcut}));
  L.push_back(layer("relu", p));
}

// Stages of `blocks[i]` blocks of planes[i]; the first block of every stage but the first strides
// by 2. Then global average pooling and the classifier "fc" (PyTorch's default initialisation).
void add_stages_and_head(std::vector<LayerSpec>& L, Block kind, std::int64_t inplanes,
                         const std::vector<std::int64_t>& planes, const std::vector<int>& blocks,
                         const PresetOptions& opts) {
  for (std::size_t s = 0; s < blocks.size(); ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const std::int64_t stride = s > 0 && b == 0 ? 2 : 1;
      add_block(L, "layer" + std::to_string(s + 1) + "." + std::to_string(b), kind, inplanes,
                planes[s], stride, opts.zero_init_residual);
      inplanes = planes[s] * expansion(kind);
    }
  }
  L.push_back(layer("global_avgpool", "avgpool"));
  LayerSpec fc = layer("linear", "fc");
  fc.out_features = opts.classes;
  L.push_back(fc);
}

}  // namespace

std::vector<LayerSpec> resnet(Block block, const std::vector<int>& blocks,
                              const PresetOptions& opts) {
  std::vector<LayerSpec> L;
  const bool cifar = stem_of(opts) == "cifar";
  L.push_back(cifar ? conv("conv1", 64, 3, 1, 1) : conv("conv1", 64, 7, 2, 3));
  L.push_back(batchnorm("bn1"));
  L.push_back(layer("relu", "relu"));
  if (!cifar) {
    LayerSpec pool = layer("maxpool", "maxpool");
    pool.kernel = 3;
    pool.stride = 2;
    pool.padding = 1;
    L.push_back(pool);
  }
  add_stages_and_head(L, block, 64, {64, 128, 256, 512}, blocks, opts);
  return L;
}

std::vector<LayerSpec> cifar_resnet(int n, const PresetOptions& opts) {
  std::vector<LayerSpec> L;
  L.push_back(conv("conv1", 16, 3, 1, 1));
  L.push_back(batchnorm("bn1"));
  L.push_back(layer("relu", "relu"));
  add_stages_and_head(L, Block::basic, 16, {16, 32, 64}, {n, n, n}, opts);
  return L;
}

}  // namespace ddp::nn::preset
