#pragma once
// PNG encoding with libpng's simplified API (for pictures of samples in reports).
#include <cstdint>
#include <vector>

#include "ddp/data/image_decode.hpp"

namespace ddp::data {

// The PNG file bytes of a grey (1 channel) or RGB (3 channel) image held planar (CHW).
std::vector<std::uint8_t> encode_png(const Image& image);

}  // namespace ddp::data
