#pragma once
// Factories of the CUDA backend's geometry-dependent ops (one file each, as in backend/cpu).
#include <memory>

#include "context.hpp"
#include "ddp/backend/backend.hpp"

namespace ddp::backend::cuda {

std::unique_ptr<ConvOp> make_conv(std::shared_ptr<Context> ctx, const ConvGeom& g);
std::unique_ptr<PoolOp> make_pool(std::shared_ptr<Context> ctx, const PoolGeom& g);
std::unique_ptr<LinearOp> make_linear(std::shared_ptr<Context> ctx, const LinearGeom& g);
std::unique_ptr<BatchNormOp> make_batch_norm(std::shared_ptr<Context> ctx, const BatchNormGeom& g);

// 1.0f and 0.0f for the alpha/beta arguments of cuDNN and cuBLAS (host pointer mode).
inline constexpr float kOne = 1.0f;
inline constexpr float kZero = 0.0f;

}  // namespace ddp::backend::cuda
