#pragma once
// A PNG of the given pixels (RGB, HWC), made with libpng's simplified writer: encoded samples for
// the pack and packed-stream tests.
#include <gtest/gtest.h>
#include <png.h>

#include <cstdint>
#include <vector>

namespace ddp::testutil {

inline std::vector<std::uint8_t> png(int w, int h, const std::vector<std::uint8_t>& hwc) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, hwc.data(), 0, nullptr));
  std::vector<std::uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, hwc.data(), 0, nullptr));
  out.resize(size);
  return out;
}

}  // namespace ddp::testutil
