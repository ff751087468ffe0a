#pragma once
// Resizing for `ddp_train pack --size HxW`. Debian has no C++ resize library that fits (OpenCV
// and libvips are large, stb's default filters differ from what Python users get), so this is
// Pillow's Image.resize(size, Image.BILINEAR) reimplemented: a separable triangle filter whose
// support widens with the reduction factor (so downscaling averages every source pixel, like an
// area filter, instead of aliasing), computed in Pillow's 22-bit fixed point, horizontal pass
// first. It gives PIL's (and so torchvision's Resize on PIL images) bytes exactly.
#include <cstdint>

#include "ddp/data/image_decode.hpp"

namespace ddp::data {

Image resize_bilinear(const Image& in, std::int64_t height, std::int64_t width);

}  // namespace ddp::data
