#include "ddp/nn/layer_registry.hpp"

#include "layers/layers.hpp"

namespace ddp::nn {

const std::vector<LayerType>& layer_registry() {
  static const std::vector<LayerType> table = {
      {"conv2d",
       "conv",
       "2-D convolution (weight [out, in/groups, kh, kw], optional bias)",
       {"out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias", "init"},
       {"out_channels", "kernel"},
       make_conv2d},
      {"linear",
       "fc",
       "fully connected: y = x W^T + b (input flattened per sample)",
       {"out_features", "bias", "init"},
       {"out_features"},
       make_linear},
      {"batchnorm",
       "bn",
       "batch normalisation over channels or features (running statistics)",
       {"momentum", "eps", "init"},
       {},
       make_batch_norm},
      {"relu", "relu", "max(x, 0)", {}, {}, make_activation},
      {"relu6", "relu", "min(max(x, 0), 6) (MobileNetV2)", {}, {}, make_activation},
      {"leaky_relu", "relu", "x if x > 0 else slope * x", {"slope"}, {}, make_activation},
      {"gelu",
       "gelu",
       "x * Phi(x), the exact (erf) form, PyTorch's default",
       {},
       {},
       make_activation},
      {"silu", "silu", "x * sigmoid(x) (swish)", {}, {}, make_activation},
      {"maxpool",
       "pool",
       "maximum over each window",
       {"kernel", "stride", "padding"},
       {"kernel"},
       make_pool},
      {"avgpool",
       "pool",
       "mean over each window (padding excluded)",
       {"kernel", "stride", "padding"},
       {"kernel"},
       make_pool},
      {"global_avgpool",
       "gap",
       "mean over height and width: C x H x W -> C",
       {},
       {},
       make_global_avgpool},
      {"flatten", "flatten", "C x H x W -> C*H*W (a view, no copy)", {}, {}, make_flatten},
      {"dropout",
       "drop",
       "inverted dropout in training, identity in evaluation",
       {"p"},
       {},
       make_dropout},
      {"add",
       "add",
       "element-wise sum of two or more inputs of equal shape (inputs = [...])",
       {},
       {},
       make_add},
      {"concat",
       "concat",
       "concatenation along channels of two or more inputs (inputs = [...])",
       {},
       {},
       make_concat},
  };
  return table;
}

const LayerType* find_layer_type(std::string_view type) {
  for (const auto& t : layer_registry())
    if (t.type == type) return &t;
  return nullptr;
}

}  // namespace ddp::nn
