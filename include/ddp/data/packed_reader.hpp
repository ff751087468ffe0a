#pragma once
// Reading a whole packed dataset file (docs/dataset_format.md) into an in-memory SampleSet,
// checking the format attributes, every chunk's CRC32, the labels' and offsets' CRC32, and label
// ranges. Encoded files with one image size are decoded here (on several threads); those whose
// images vary stay encoded (SampleSet::encoded), decoded by the loader.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// DataError naming the file (and the chunk with its sample range, or the sample) on any problem.
SampleSet read_packed(const std::filesystem::path& file);

// For each of these file samples (empty: all, in file order), the chunk of the file its bytes start
// in: data.shuffle_window's order, the same whether the file is streamed or held in memory.
std::vector<std::int64_t> chunk_of_samples(const std::filesystem::path& file,
                                           std::span<const std::int64_t> samples);

}  // namespace ddp::data
