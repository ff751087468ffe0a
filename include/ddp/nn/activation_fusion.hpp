#pragma once
// Activations folded into the layer below them. A ReLU after a batch norm costs two passes over
// memory of its own in forward and three in backward; a batch norm that applies it itself (the
// CPU's: Backend::batch_norm_fuses) writes act(bn(x)) in the pass it makes anyway, and masks its
// output gradient in backward. A residual add does the same with the ReLU after it (add_fuses):
// it saves the forward pass; its backward masks dy instead of the ReLU. The activation layer
// stays in the graph (names, shapes, exports are unchanged) but does no work: it runs in place
// over the layer's buffer, so its output is that buffer, and its input gradient is its output
// gradient, which the layer below reads.
#include <memory>
#include <optional>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

// A layer that can apply an activation to its own output (batch norm, add).
class FusesActivation {
 public:
  // From now on apply `kind` to the output in forward, and take the gradient of the activation's
  // output in backward. False (and nothing changes) when this backend cannot.
  virtual bool fuse_activation(backend::Activation kind) = 0;

 protected:
  ~FusesActivation() = default;
};

// An activation layer that can leave its work to the layer below.
class FusableActivation {
 public:
  virtual backend::Activation activation_kind() const = 0;
  // From now on forward and backward do nothing: the layer below computes both.
  virtual void set_fused() = 0;

 protected:
  ~FusableActivation() = default;
};

// Folds every activation that runs in place over a layer able to apply it into that layer (after
// plan_graph, and after plan_layouts: the layer below rebuilds its backend op). Returns, per
// layer, whether it was folded into the one below.
std::vector<bool> fuse_activations(const std::vector<std::unique_ptr<Layer>>& layers,
                                   const GraphPlan& plan);

}  // namespace ddp::nn
