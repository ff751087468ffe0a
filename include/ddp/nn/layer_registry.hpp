#pragma once
// Every layer type, once: its name in the config, the prefix of its default names, a line of
// documentation, the [[model.layers]] keys it takes and its factory. make_layer, the config schema
// (which keys apply to which type), default names and `ddp_train layers` all read this table.
#include <memory>
#include <string_view>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

struct LayerType {
  std::string_view type;    // "conv2d"
  std::string_view family;  // default names: family + ordinal ("conv1"); shared by maxpool/avgpool
  std::string_view doc;     // one line
  std::vector<std::string_view> keys;      // besides type, name, input, inputs
  std::vector<std::string_view> required;  // keys that must be given
  std::unique_ptr<Layer> (*make)(const LayerSpec&, backend::Backend&);
};

const std::vector<LayerType>& layer_registry();
const LayerType* find_layer_type(std::string_view type);  // nullptr when unknown

}  // namespace ddp::nn
