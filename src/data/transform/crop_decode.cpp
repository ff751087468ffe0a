#include "ddp/data/crop_decode.hpp"

#include <algorithm>

namespace ddp::data {

ScaledCrop plan_scaled_crop(std::int64_t height, std::int64_t width, const CropBox& box,
                            std::int64_t out_height, std::int64_t out_width) {
  ScaledCrop best{1, 1, box};
  if (box.height * 2 > height || box.width * 2 > width) return best;
  double best_scale = 1.0;
  for (const auto& [num, denom] : jpeg_scaling_factors()) {
    const double s = static_cast<double>(num) / denom;
    if (s >= best_scale) continue;
    // Edges rounded outwards, clamped to the scaled image (TurboJPEG's ceil(side * num / denom)).
    const auto floor_at = [&](std::int64_t v) { return v * num / denom; };
    const auto ceil_at = [&](std::int64_t v) { return (v * num + denom - 1) / denom; };
    const std::int64_t top = floor_at(box.top), left = floor_at(box.left);
    const std::int64_t bottom = std::min(ceil_at(box.top + box.height), ceil_at(height));
    const std::int64_t right = std::min(ceil_at(box.left + box.width), ceil_at(width));
    if (bottom - top < out_height || right - left < out_width) continue;
    best = {num, denom, {top, left, bottom - top, right - left}};
    best_scale = s;
  }
  return best;
}

Image decode_resized_crop(std::span<const std::uint8_t> bytes, const std::string& name,
                          int channels,
                          const std::function<CropBox(std::int64_t, std::int64_t)>& pick,
                          std::int64_t out_height, std::int64_t out_width, bool scaled_decode) {
  if (scaled_decode && is_jpeg(bytes)) {
    const auto [h, w] = image_size(bytes, name);
    const CropBox box = pick(h, w);
    const ScaledCrop plan = plan_scaled_crop(h, w, box, out_height, out_width);
    if (plan.num != plan.denom) {
      const Image small = decode_jpeg_scaled(bytes, name, channels, plan.num, plan.denom);
      return resized_crop(small, plan.box, out_height, out_width);
    }
    return resized_crop(decode_image(bytes, name, channels), box, out_height, out_width);
  }
  const Image img = decode_image(bytes, name, channels);
  return resized_crop(img, pick(img.height, img.width), out_height, out_width);
}

}  // namespace ddp::data
