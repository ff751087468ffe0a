#pragma once
// Image decoding with the maintained libraries: JPEG with libjpeg-turbo's TurboJPEG API (the same
// settings as Pillow's defaults: accurate integer IDCT, fancy upsampling, so pixels are bit-equal
// to PIL's), PNG with libpng's simplified API, and the rest of torchvision's IMG_EXTENSIONS (BMP,
// PPM/PGM, TIFF, WebP; and GIF) with Leptonica. The file type is told by its magic bytes, not its
// name.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ddp::data {

// A decoded image: uint8, planar CHW (the layout of SampleSet and of packed raw files).
struct Image {
  std::int64_t channels = 0, height = 0, width = 0;
  std::vector<std::uint8_t> pixels;
};

// True when the bytes start like a JPEG (FF D8 FF) or a PNG (89 'P' 'N' 'G').
bool is_jpeg(std::span<const std::uint8_t> bytes);
bool is_png(std::span<const std::uint8_t> bytes);

// Decodes an image. `channels` is what the set holds: 3 (RGB), 1 (grey) or 0 (whatever this image
// stores: 1 for grey, 3 for colour). A grey image in an RGB set is converted as torchvision's
// ImageFolder converts it (PIL's convert("RGB"): the grey value in every channel), and
// `*converted` (when given) says whether it was. Throws DataError starting with `name` when the
// bytes are not an image we read, are corrupt or truncated, are CMYK, are 16 bits per channel, or
// are colour in a grey set. An alpha channel is dropped, as PIL's convert("RGB") does.
Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                   bool* converted = nullptr);

// The stored (height, width) of an image from its header, without decoding the pixels; (0, 0)
// when the bytes are not an image we read. DataError starting with `name` on a corrupt header.
std::pair<std::int64_t, std::int64_t> image_size(std::span<const std::uint8_t> bytes,
                                                 const std::string& name);

// TurboJPEG's scaling factors (num, denom): decoding at num/denom of the size costs roughly that
// fraction squared of the IDCT work. The result is TurboJPEG's scaled IDCT, not a resize of the
// full decode, so its pixels differ from PIL's (an approximation used for small crops).
std::vector<std::pair<int, int>> jpeg_scaling_factors();

// Decodes a JPEG at num/denom (one of jpeg_scaling_factors()) of its size: ceil(side * num /
// denom) per side. Errors as decode_image().
Image decode_jpeg_scaled(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                         int num, int denom);

}  // namespace ddp::data
