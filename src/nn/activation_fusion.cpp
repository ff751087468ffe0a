#include "ddp/nn/activation_fusion.hpp"

namespace ddp::nn {

std::vector<bool> fuse_activations(const std::vector<std::unique_ptr<Layer>>& layers,
                                   const GraphPlan& plan) {
  std::vector<bool> fused(layers.size(), false);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto* act = dynamic_cast<FusableActivation*>(layers[i].get());
    if (!act || plan.inputs[i].size() != 1 || !plan.runs_in_place(i, *layers[i])) continue;
    // In place over p (never the model input or a view: plan_graph): p's output is read by this
    // layer alone and lives in the same buffer, so p may write the activation's output there
    // itself. p may run in place itself (batch norm -> add -> ReLU share one buffer).
    const auto p = static_cast<std::size_t>(plan.inputs[i][0]);
    auto* below = dynamic_cast<FusesActivation*>(layers[p].get());
    if (below && below->fuse_activation(act->activation_kind())) {
      act->set_fused();
      fused[i] = true;
    }
  }
  return fused;
}

}  // namespace ddp::nn
