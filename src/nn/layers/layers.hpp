#pragma once
// Factories of the layer kinds (one file each); make_layer() dispatches on the spec's type.
#include <memory>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

std::unique_ptr<Layer> make_conv2d(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_linear(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_pool(const LayerSpec& spec, backend::Backend& be);
// relu, relu6, leaky_relu, gelu, silu (the spec's type picks the function).
std::unique_ptr<Layer> make_activation(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_relu(const LayerSpec& spec, backend::Backend& be);  // = make_activation
std::unique_ptr<Layer> make_flatten(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_dropout(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_batch_norm(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_add(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_concat(const LayerSpec& spec, backend::Backend& be);
std::unique_ptr<Layer> make_global_avgpool(const LayerSpec& spec, backend::Backend& be);

}  // namespace ddp::nn
