#pragma once
// train.max_micro_batch = auto: every rank's micro-batch cap, measured on a GPU from what its
// memory holds once the model, gradients and optimizer state are in it (auto_micro_batch_cap),
// none on the CPU; gathered, because sync batch norm makes every rank run as many micro-batches
// as the one that runs the most.
#include <cstdint>
#include <ostream>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/nn/layer_spec.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/batch_plan.hpp"

namespace ddp::train {

// Every rank's cap (rank order) for `model` (built from `layers`, on `be`) under `plan`; measured
// caps are announced on `out`. Collective over comm; ConfigError naming the rank whose device
// cannot hold one sample.
std::vector<std::int64_t> gather_auto_caps(const BatchPlan& plan, backend::Backend& be,
                                           nn::Model& model,
                                           const std::vector<nn::LayerSpec>& layers,
                                           comm::Communicator& comm, std::ostream& out);

}  // namespace ddp::train
