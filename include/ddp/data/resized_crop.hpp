#pragma once
// The geometry of torchvision 0.14's RandomResizedCrop / Resize / CenterCrop on PIL images, and the
// pixel operations that apply it: crop a box, then Pillow's bilinear resize (image_resize.hpp), so
// for a given box the output equals F.resized_crop(img, ..., BILINEAR) byte for byte.
#include <cstdint>
#include <functional>

#include "ddp/data/image_decode.hpp"

namespace ddp::data {

// A box in an image, in pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  std::int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// RandomResizedCrop's scale (fraction of the area) and ratio (width / height) ranges; the defaults
// are torchvision's.
struct ResizedCropRange {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};

// RandomResizedCrop.get_params: 10 tries of a uniform area fraction and a log-uniform aspect
// ratio, each kept if it fits (with a uniform position), else the centre crop with the ratio
// clamped into range. `uniform()` gives doubles in [0, 1) (the caller's seeded stream; torch's
// generator differs, so only the rule, not the draws, matches torchvision).
CropBox random_resized_crop_box(std::int64_t height, std::int64_t width,
                                const ResizedCropRange& range,
                                const std::function<double()>& uniform);

// Resize(size)'s output for an int size: the shorter side becomes `size`, the longer one
// int(size * long / short) (truncated, as torchvision computes it).
struct Size2 {
  std::int64_t height = 0, width = 0;
};
Size2 shorter_side_size(std::int64_t height, std::int64_t width, std::int64_t size);

// CenterCrop(crop) of a height x width image (crop <= both sides): offsets
// int(round((side - crop) / 2)), Python's round (halves to even).
CropBox center_crop_box(std::int64_t height, std::int64_t width, std::int64_t crop);

// The box's pixels, copied out (the box must lie inside the image).
Image crop(const Image& in, const CropBox& box);

// F.resized_crop(img, box, (height, width), BILINEAR) on a PIL image.
Image resized_crop(const Image& in, const CropBox& box, std::int64_t height, std::int64_t width);

// CenterCrop(crop)(Resize(resize)(img)) on a PIL image (bilinear); needs crop <= resize.
Image resize_center_crop(const Image& in, std::int64_t resize, std::int64_t crop);

}  // namespace ddp::data
