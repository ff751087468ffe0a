#pragma once
// The element-wise activation layer, for the files that register an activation type (this
// directory's activation.cpp and one file per newer activation): one layer class parameterised by
// the backend's kind, which holds the arithmetic (Backend::activation_forward / _backward).
#include <memory>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

// A layer computing `kind`; alpha is spec.slope for leaky_relu.
std::unique_ptr<Layer> make_activation(const LayerSpec& spec, backend::Backend& be,
                                       backend::Activation kind);

// make_activation as a LayerType factory: .make = make_activation_of<backend::Activation::relu>.
template <backend::Activation Kind>
std::unique_ptr<Layer> make_activation_of(const LayerSpec& spec, backend::Backend& be) {
  return make_activation(spec, be, Kind);
}

}  // namespace ddp::nn
