#include "ddp/data/resized_crop.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ddp/data/image_resize.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// Python's round() to an int: halves go to the even neighbour (the default rounding mode).
std::int64_t py_round(double v) {
  return static_cast<std::int64_t>(std::nearbyint(v));
}

}  // namespace

CropBox random_resized_crop_box(std::int64_t height, std::int64_t width,
                                const ResizedCropRange& range,
                                const std::function<double()>& uniform) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(range.ratio_min), log_hi = std::log(range.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    // The draws are made in a fixed order and number per try, whether or not the try fits.
    const double target_area =
        area * (range.scale_min + (range.scale_max - range.scale_min) * uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * uniform());
    const double u_top = uniform(), u_left = uniform();
    const std::int64_t w = py_round(std::sqrt(target_area * aspect));
    const std::int64_t h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      // randint(0, n) is uniform on [0, n); the product stays below n since u < 1.
      const auto top = static_cast<std::int64_t>(u_top * static_cast<double>(height - h + 1));
      const auto left = static_cast<std::int64_t>(u_left * static_cast<double>(width - w + 1));
      return {std::min(top, height - h), std::min(left, width - w), h, w};
    }
  }
  // Fallback: the centre crop, its aspect ratio clamped into [ratio_min, ratio_max].
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::int64_t w = width, h = height;
  if (in_ratio < std::min(range.ratio_min, range.ratio_max)) {
    h = py_round(static_cast<double>(w) / std::min(range.ratio_min, range.ratio_max));
  } else if (in_ratio > std::max(range.ratio_min, range.ratio_max)) {
    w = py_round(static_cast<double>(h) * std::max(range.ratio_min, range.ratio_max));
  }
  // An extreme data.rrc_ratio on a small image would round a side to 0 pixels.
  h = std::max<std::int64_t>(h, 1);
  w = std::max<std::int64_t>(w, 1);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Size2 shorter_side_size(std::int64_t height, std::int64_t width, std::int64_t size) {
  const bool portrait = width <= height;
  const std::int64_t shorter = portrait ? width : height, longer = portrait ? height : width;
  const auto new_long = static_cast<std::int64_t>(
      static_cast<double>(size) * static_cast<double>(longer) / static_cast<double>(shorter));
  return portrait ? Size2{new_long, size} : Size2{size, new_long};
}

CropBox center_crop_box(std::int64_t height, std::int64_t width, std::int64_t crop) {
  if (crop > height || crop > width)
    throw DataError("centre crop " + std::to_string(crop) + " is larger than the " +
                    std::to_string(width) + "x" + std::to_string(height) + " image");
  return {py_round(static_cast<double>(height - crop) / 2.0),
          py_round(static_cast<double>(width - crop) / 2.0), crop, crop};
}

Image crop(const Image& in, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 ||
      box.top + box.height > in.height || box.left + box.width > in.width)
    throw DataError("crop box " + std::to_string(box.width) + "x" + std::to_string(box.height) +
                    " at (" + std::to_string(box.left) + ", " + std::to_string(box.top) +
                    ") does not lie inside the " + std::to_string(in.width) + "x" +
                    std::to_string(in.height) + " image");
  if (box.height == in.height && box.width == in.width) return in;
  Image out{
      in.channels, box.height, box.width,
      std::vector<std::uint8_t>(static_cast<std::size_t>(in.channels * box.height * box.width))};
  for (std::int64_t c = 0; c < in.channels; ++c)
    for (std::int64_t y = 0; y < box.height; ++y) {
      const std::uint8_t* src =
          in.pixels.data() + (c * in.height + box.top + y) * in.width + box.left;
      std::copy(src, src + box.width, out.pixels.data() + (c * box.height + y) * box.width);
    }
  return out;
}

Image resized_crop(const Image& in, const CropBox& box, std::int64_t height, std::int64_t width) {
  return resize_bilinear(crop(in, box), height, width);
}

Image resize_center_crop(const Image& in, std::int64_t resize, std::int64_t crop_size) {
  const Size2 s = shorter_side_size(in.height, in.width, resize);
  const Image resized = resize_bilinear(in, s.height, s.width);
  return crop(resized, center_crop_box(s.height, s.width, crop_size));
}

}  // namespace ddp::data
