#pragma once
// Factories of the CPU backend's geometry-dependent ops (one file each).
#include <memory>

#include "ddp/backend/backend.hpp"

namespace ddp::backend::cpu {

std::unique_ptr<ConvOp> make_conv(const ConvGeom& g);
std::unique_ptr<PoolOp> make_pool(const PoolGeom& g);
std::unique_ptr<LinearOp> make_linear(const LinearGeom& g);
std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormGeom& g);

}  // namespace ddp::backend::cpu
