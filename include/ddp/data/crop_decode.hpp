#pragma once
// Decoding an encoded sample straight to a resized crop: for a JPEG whose crop box is at most half
// the image each way, TurboJPEG decodes at a reduced scale (its DCT scaling) and the box is mapped
// into the smaller image, which skips most of the decode work for small random-resized crops. This
// is an approximation (TurboJPEG's scaled IDCT instead of PIL's full decode + bilinear), so it can
// be turned off (data.scaled_decode); with it off the result equals torchvision's bit for bit.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ddp/data/image_decode.hpp"
#include "ddp/data/resized_crop.hpp"

namespace ddp::data {

// A decode scale num/denom and the crop box mapped into the image decoded at that scale.
struct ScaledCrop {
  int num = 1, denom = 1;
  CropBox box;
};

// When `box` is at most half of the height x width image in each dimension, the smallest of
// TurboJPEG's factors below 1 at which the mapped box still has at least out_height x out_width
// pixels (so the final resize never enlarges what a full decode would have shrunk); else 1/1 and
// the box unchanged. The mapped box covers the original one: its edges are rounded outwards.
ScaledCrop plan_scaled_crop(std::int64_t height, std::int64_t width, const CropBox& box,
                            std::int64_t out_height, std::int64_t out_width);

// Decodes `bytes` (JPEG or PNG; `name` and `channels` as decode_image), picks the crop box from the
// stored size with `pick(height, width)`, and returns the box resized to out_height x out_width
// (Pillow bilinear); scaled decoding as above when `scaled_decode` and the bytes are a JPEG.
Image decode_resized_crop(std::span<const std::uint8_t> bytes, const std::string& name,
                          int channels,
                          const std::function<CropBox(std::int64_t, std::int64_t)>& pick,
                          std::int64_t out_height, std::int64_t out_width, bool scaled_decode);

}  // namespace ddp::data
