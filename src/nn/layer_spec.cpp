#include "ddp/nn/layer_spec.hpp"

namespace ddp::nn {

std::string layer_label(std::size_t index, const LayerSpec& spec) {
  return "model.layers[" + std::to_string(index) + "] (" + spec.type + " '" + spec.name + "')";
}

}  // namespace ddp::nn
