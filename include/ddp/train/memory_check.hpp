#pragma once
// The configuration against this machine, once the data's shape is known.
#include <cstdint>

#include "ddp/backend/backend.hpp"
#include "ddp/shape.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

// Throws ConfigError when the model and batch clearly cannot fit in memory (more than the physical
// RAM), saying the estimate and which keys drive it (a layer's out_features/out_channels,
// train.batch_size or train.global_batch). `input`: one sample's shape; rank_batch and micro_batch:
// the samples per rank and step, and per forward pass, as the trainer allocates them.
void check_memory_fits(const Setup& cfg, const Shape& input, std::int64_t rank_batch,
                       std::int64_t micro_batch, backend::Backend& be);

}  // namespace ddp::train
