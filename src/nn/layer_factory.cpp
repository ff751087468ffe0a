#include "ddp/nn/layer_factory.hpp"

#include "ddp/error.hpp"
#include "layers/layers.hpp"

namespace ddp::nn {

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, backend::Backend& be) {
  const std::string& t = spec.type;
  if (t == "conv2d") return make_conv2d(spec, be);
  if (t == "linear") return make_linear(spec, be);
  if (t == "maxpool" || t == "avgpool") return make_pool(spec, be);
  if (t == "relu") return make_relu(spec, be);
  if (t == "flatten") return make_flatten(spec, be);
  if (t == "dropout") return make_dropout(spec, be);
  if (t == "batchnorm") return make_batch_norm(spec, be);
  throw ConfigError("model: layer '" + spec.name + "' has unknown type '" + t +
                    "' (known: conv2d, linear, maxpool, avgpool, relu, flatten, dropout, "
                    "batchnorm)");
}

}  // namespace ddp::nn
