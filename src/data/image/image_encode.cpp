#include "ddp/data/image_encode.hpp"

#include <png.h>

#include "ddp/error.hpp"

namespace ddp::data {

std::vector<std::uint8_t> encode_png(const Image& image) {
  const auto c = image.channels, h = image.height, w = image.width;
  if ((c != 1 && c != 3) || h <= 0 || w <= 0 ||
      image.pixels.size() != static_cast<std::size_t>(c * h * w))
    throw Error("encode_png: expected a 1- or 3-channel image whose pixels fill it");
  // libpng's simplified API takes interleaved rows (HWC).
  std::vector<std::uint8_t> hwc(image.pixels.size());
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t i = 0; i < h * w; ++i)
      hwc[static_cast<std::size_t>(i * c + ch)] =
          image.pixels[static_cast<std::size_t>(ch * h * w + i)];
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(w);
  png.height = static_cast<png_uint_32>(h);
  png.format = c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, hwc.data(), 0, nullptr))
    throw Error(std::string("encode_png: libpng: ") + png.message);
  std::vector<std::uint8_t> out(size);
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, hwc.data(), 0, nullptr))
    throw Error(std::string("encode_png: libpng: ") + png.message);
  out.resize(size);
  return out;
}

}  // namespace ddp::data
