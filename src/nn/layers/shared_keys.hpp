#pragma once
// The [[model.layers]] keys that several layer types take, defined once: a window's kernel, stride
// and padding (conv2d and the pools), and a learned layer's bias and init (conv2d, linear,
// batchnorm). A key of one type alone is defined in that type's file.
#include "ddp/nn/layer_registry.hpp"

namespace ddp::nn::keys {

inline LayerKeyDef kernel() {
  return {DDP_SPEC_FIELD(kernel), .help = "window size: an integer or [height, width]",
          .range = {.lo = 1}};
}
inline LayerKeyDef stride() {
  return {DDP_SPEC_FIELD(stride),
          .help = "step of the window, integer or [h, w] (0 = 1 for conv2d, = kernel for pools)",
          .range = {.lo = 0}};
}
inline LayerKeyDef padding() {
  return {DDP_SPEC_FIELD(padding),
          .help = "zero padding on each side, integer or [h, w] (pools: at most kernel / 2)",
          .range = {.lo = 0}};
}
inline LayerKeyDef bias() {
  return {DDP_SPEC_FIELD(bias), .help = "learn an additive bias"};
}
inline LayerKeyDef init() {
  return {DDP_SPEC_FIELD(init),
          .help =
              "initialisation: \"\" (PyTorch's default), kaiming_normal (fan-out, bias 0), "
              "normal (std 0.01, bias 0), zeros (batchnorm weight 0); conv2d only: dirac "
              "(identity filters, torch.nn.init.dirac_), partial_dirac (default, then the first "
              "in/groups filters identity), patch_whitening (from the training images' patch "
              "covariance: model.whitening_*); bias 0 with any of them",
          .choices = {"", "kaiming_normal", "normal", "zeros", "dirac", "partial_dirac",
                      "patch_whitening"}};
}

}  // namespace ddp::nn::keys
