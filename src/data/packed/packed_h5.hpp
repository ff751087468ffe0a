#pragma once
// HDF5 pieces the packed-format reader and writer share (internal to src/data): opening a packed
// file with a message naming it, 1-D dataset shapes and whole/partial reads, and the
// variable-length UTF-8 string type of `classes`; the corrupt-file error and the byte views of the
// checksummed arrays that the whole-file reader and the stream share.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "../file_io.hpp"
#include "ddp/error.hpp"
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

// A CRC32 as 8 hex digits, as the messages show stored and computed sums.
inline std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The error for damage a checksum or a size reveals, naming the file and what is wrong.
inline DataError corrupt(const std::filesystem::path& file, const std::string& what) {
  return DataError(data::detail::quoted(file) + ": " + what +
                   ": the file is corrupt (damaged in storage or in transfer); pack it again");
}

// The bytes of an array, for its checksum.
template <typename T>
std::span<const std::uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace ddp::data::packed::detail
