#pragma once
// Which activations are kept in the backend's blocked layout (backend::ConvGeom): on the CPU,
// oneDNN's convolutions compute in nChw8c/nChw16c, and an activation handed between layers in
// plain NCHW costs two conversions per convolution and pass. Activations joined by layers that
// keep their input's layout (ReLU, add, batch norm, pooling) form a group that is blocked as a
// whole, or not at all: blocked when every activation in it is an image whose channels are a
// multiple of the block, and every layer producing or reading one of them takes the blocked layout
// (Layer::layout_use). The model input and the logits stay plain, as do activations read by
// flatten, linear, concat, dropout. For ResNets this keeps every activation between the stem's
// input and the global pooling blocked (for MobileNetV2 those whose channels are a multiple of the
// block: all with AVX2's 8; with AVX-512's 16, not the 24-channel ones).
#include <memory>
#include <vector>

#include "ddp/nn/graph.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

// Per layer: the block of its output (0: plain NCHW). block: Backend::activation_block() (0: none,
// every output plain). Tells each layer that takes a blocked layout its input's and output's
// (Layer::set_layouts).
std::vector<int> plan_layouts(const std::vector<std::unique_ptr<Layer>>& layers,
                              const GraphPlan& plan, int block);

}  // namespace ddp::nn
