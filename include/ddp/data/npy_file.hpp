#pragma once
// NumPy .npy files (format 1.0, 2.0 and 3.0: the magic "\x93NUMPY", a version, a little-endian
// header length, then a Python dict literal {'descr': '<i8', 'fortran_order': False, 'shape':
// (60000, 28, 28), } padded with spaces, then the C-order data). A tiny documented format, parsed
// here rather than adding a dependency; only what `pack --format npy` needs.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddp::data {

struct NpyHeader {
  char kind = 0;            // 'u' unsigned int, 'i' signed int, 'f', 'b', ...
  int item_bytes = 0;       // 1, 2, 4, 8
  bool big_endian = false;  // '>' in descr
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;  // where the elements start

  std::int64_t elements() const;
};

// Parses the header of `bytes` (the whole file or at least its header); DataError starting with
// `name` when it is not a .npy file or the header is malformed.
NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, const std::string& name);

// Labels of any integer dtype as int32 (range-checked), from a 1-D array.
std::vector<std::int32_t> npy_int_labels(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                         const std::string& name);

}  // namespace ddp::data
