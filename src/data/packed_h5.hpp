#pragma once
// HDF5 pieces the packed-format reader and writer share (internal to src/data): opening a packed
// file with a message naming it, 1-D dataset shapes and whole/partial reads, and the
// variable-length UTF-8 string type of `classes`.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ddp/h5/handles.hpp"

namespace ddp::data::packed::detail {

// Opens `file` read-only; DataError naming it when it is missing or not a readable HDF5 file.
h5::File open_for_reading(const std::filesystem::path& file);

// The dimensions of dataset `path`; DataError naming file and dataset when absent.
std::vector<std::uint64_t> dims_of(hid_t f, const std::filesystem::path& file,
                                   const std::string& path);

// Reads elements [first, first+count) of the first dimension of dataset `path` (all its other
// dimensions) through memory type `mem_type` into out.
void read_rows(hid_t f, const std::filesystem::path& file, const std::string& path, hid_t mem_type,
               std::uint64_t first, std::uint64_t count, void* out);

// A variable-length UTF-8 string type (what h5py writes for str).
h5::Datatype vlen_utf8();

}  // namespace ddp::data::packed::detail
