#pragma once
// Creates a layer of the kind a spec names, running on the given backend.
#include <memory>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

// Throws ConfigError for an unknown layer type.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, backend::Backend& be);

}  // namespace ddp::nn
