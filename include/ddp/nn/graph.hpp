#pragma once
// The layer graph: which outputs each layer reads and where each output is stored. Layers are kept
// in file order, which is a topological order (a layer may only read layers above it), so forward
// runs them front to back and backward back to front.
#include <memory>
#include <vector>

#include "ddp/nn/layer.hpp"
#include "ddp/shape.hpp"

namespace ddp::nn {

// A producer index meaning "the model input".
constexpr int kModelInput = -1;

struct GraphPlan {
  std::vector<std::vector<int>> inputs;  // per layer: producer layers (kModelInput: the input)
  std::vector<int> consumers;            // per layer: how many inputs of later layers read it
  // Per layer: the layer whose buffers hold its output - itself, or for a view (flatten) or a layer
  // running in place the storage of the input it shares; kModelInput for a view of the model
  // input.
  std::vector<int> storage;
  std::vector<Shape> out_shapes;  // per sample

  bool owns_storage(std::size_t i) const { return storage[i] == static_cast<int>(i); }
  // Writes its output over its input's buffer (not a view).
  bool runs_in_place(std::size_t i, const Layer& layer) const {
    return !owns_storage(i) && !layer.is_view();
  }
};

// Resolves each layer's inputs by name (LayerSpec::inputs; none = the layer above, or the model
// input for the first), infers every output shape (Layer::infer) and decides storage: a layer
// that can run in place does so over its first input that is not a view, is read by nothing else,
// and whose producer's backward does not read it. Throws ConfigError naming the layer and its
// config line for an unknown input, an input not above the layer (a cycle), a wrong number of
// inputs, and an output that nothing reads (every layer but the last feeds another).
GraphPlan plan_graph(const std::vector<std::unique_ptr<Layer>>& layers, const Shape& input);

}  // namespace ddp::nn
