#pragma once
// What a configured dataset's samples look like, without reading its pixels: the shape of one
// image and the class count (fixed for the built-in datasets; a packed file's header says). The
// commands that rebuild a trained model without its data (predict, export) size it from this.
#include <cstdint>

#include "ddp/data/options.hpp"

namespace ddp::data {

struct Geometry {
  std::int64_t channels = 0, height = 0, width = 0;
  int classes = 0;
};

// DataError naming the file for a packed file that cannot be read or whose images differ in size.
Geometry dataset_geometry(const Options& opt);

}  // namespace ddp::data
