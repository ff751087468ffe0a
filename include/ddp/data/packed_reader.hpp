#pragma once
// Reading a whole packed dataset file (docs/dataset_format.md) into an in-memory Dataset, checking
// the format attributes, every chunk's CRC32, the labels' and offsets' CRC32, and label ranges.
// Encoded files with one image size are decoded here (on several threads); those whose images vary
// stay encoded (Dataset::encoded), decoded by the loader.
#include <filesystem>

#include "ddp/data/dataset.hpp"

namespace ddp::data {

// DataError naming the file (and the chunk with its sample range, or the sample) on any problem.
Dataset read_packed(const std::filesystem::path& file);

}  // namespace ddp::data
