#pragma once
// The per-sample path of fill_batch when Augmentation::out_size is set (internal to src/data):
// decode if encoded, random-resized crop + flip (training) or resize + centre crop (evaluation),
// then normalise. Draws depend only on (seed, epoch, sample index).
#include <cstdint>

#include "ddp/data/sample_set.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data::detail {

// Writes sample `idx` as channels x out_size x out_size normalised floats into `out`.
void transform_sized_sample(const SampleSet& ds, std::int64_t idx, const Normalization& norm,
                            const Augmentation& aug, std::uint64_t seed, std::uint64_t epoch,
                            float* out);

}  // namespace ddp::data::detail
