#pragma once
// Reading a whole packed dataset file (docs/dataset_format.md) into an in-memory SampleSet,
// checking the format attributes, every chunk's CRC32, the labels' and offsets' CRC32, and label
// ranges. Encoded files with one image size are decoded here (on several threads); those whose
// images vary stay encoded (SampleSet::encoded), decoded by the loader.
#include <filesystem>

#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// DataError naming the file (and the chunk with its sample range, or the sample) on any problem.
SampleSet read_packed(const std::filesystem::path& file);

}  // namespace ddp::data
