#pragma once
// Validation of normalisation / augmentation settings against a dataset (internal to src/data), so
// the loader can reject them on the caller's thread before any worker runs.
#include "ddp/data/sample_set.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data::detail {

// Throws DataError unless mean and std each have 1 or channels() entries, every std is positive and
// finite, every mean finite, and crop_padding >= 0.
void validate_transform(const SampleSet& ds, const Normalization& norm, const Augmentation& aug);

}  // namespace ddp::data::detail
