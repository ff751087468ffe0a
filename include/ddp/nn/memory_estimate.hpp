#pragma once
// What a model will hold in memory, found from the layers' shape inference before anything large is
// allocated: an absurd size (out_features = 4e9, a batch of 1e9) can then be refused with a message
// naming the key, instead of ending in std::bad_alloc.
#include <cstddef>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer_spec.hpp"
#include "ddp/shape.hpp"

namespace ddp::nn {

// One layer's share, in floats (doubles: the products of absurd sizes must not overflow).
struct LayerFootprint {
  double params = 0;   // trainable scalars (what gradients and optimizer state multiply)
  double buffers = 0;  // non-trainable state (batch-norm running statistics)
  // Activation floats per sample the model keeps for the layer (output and output gradient); 0 for
  // a view (flatten) or a layer that runs in place on the buffers of the one below.
  double activations = 0;
};

struct MemoryEstimate {
  std::vector<LayerFootprint> layers;  // parallel to the specs
  double params() const;
  double buffers() const;
  double activations_per_sample() const;
};

// The footprint of the model Model(specs, input, ..., be) would build, by the same shape inference
// and buffer-sharing rules, without allocating parameters or activations. Throws ConfigError where
// Model would (a layer that does not fit its input).
MemoryEstimate estimate_memory(const std::vector<LayerSpec>& specs, const Shape& input,
                               backend::Backend& be);

}  // namespace ddp::nn
