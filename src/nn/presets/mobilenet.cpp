// MobileNetV2 as torchvision 0.14 builds it (torchvision/models/mobilenetv2.py, width 1.0), with
// its module names: features.0.{0,1,2} (convolution, batch norm, ReLU6 of the stem),
// features.N.conv.* (inverted residual blocks), features.18, classifier.0 (dropout 0.2) and
// classifier.1 (linear, N(0, 0.01) weights). A block with a residual connection ends in an add
// named after the block ("features.3"). The cifar stem only makes the first convolution stride 1
// (32x32 inputs end at 2x2 instead of 1x1); every other stride is torchvision's.
#include "preset_parts.hpp"

namespace ddp::nn::preset {
namespace {

// [conv, batch norm, ReLU6] named p.0, p.1, p.2 (torchvision's Conv2dNormActivation).
void conv_bn_relu6(std::vector<LayerSpec>& L, const std::string& p, std::int64_t out,
                   std::int64_t kernel, std::int64_t stride, std::int64_t groups = 1) {
  L.push_back(conv(p + ".0", out, kernel, stride, (kernel - 1) / 2, groups));
  L.push_back(batchnorm(p + ".1"));
  L.push_back(layer("relu6", p + ".2"));
}

}  // namespace

std::vector<LayerSpec> mobilenet_v2(const PresetOptions& opts) {
  struct Stage {
    std::int64_t t, c, n, s;  // expansion, output channels, blocks, first stride
  };
  static constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  std::vector<LayerSpec> L;
  conv_bn_relu6(L, "features.0", 32, 3, stem_of(opts) == "cifar" ? 1 : 2);
  std::int64_t inp = 32;
  int index = 1;
  for (const Stage& st : kStages) {
    for (std::int64_t i = 0; i < st.n; ++i, ++index) {
      const std::string p = "features." + std::to_string(index);
      const std::string in = L.back().name;
      const std::int64_t stride = i == 0 ? st.s : 1, hidden = inp * st.t;
      int j = 0;  // index within p.conv
      if (st.t != 1) conv_bn_relu6(L, p + ".conv." + std::to_string(j++), hidden, 1, 1);
      conv_bn_relu6(L, p + ".conv." + std::to_string(j++), hidden, 3, stride, hidden);  // depthwise
      L.push_back(conv(p + ".conv." + std::to_string(j++), st.c, 1, 1, 0));             // linear
      L.push_back(batchnorm(p + ".conv." + std::to_string(j)));
      if (stride == 1 && inp == st.c) L.push_back(layer("add", p, {L.back().name, in}));
      inp = st.c;
    }
  }
  conv_bn_relu6(L, "features." + std::to_string(index), 1280, 1, 1);
  L.push_back(layer("global_avgpool", "avgpool"));
  LayerSpec dropout = layer("dropout", "classifier.0");
  dropout.p = 0.2f;
  L.push_back(dropout);
  LayerSpec fc = layer("linear", "classifier.1");
  fc.out_features = opts.classes;
  fc.init = "normal";
  L.push_back(fc);
  return L;
}

}  // namespace ddp::nn::preset
