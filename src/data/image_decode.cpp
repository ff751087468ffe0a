#include "ddp/data/image_decode.hpp"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "ddp/cpu_clones.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// Decoded sizes beyond this are refused before allocating (a corrupt header can claim 65535^2).
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 28;

std::string set_name(int channels) {
  return channels == 1 ? "grey" : "RGB";
}

// The set's channels against this image's: refuse a mismatch, naming both.
int check_channels(int stored, int wanted, const std::string& name, const std::string& kind) {
  if (wanted == 0 || wanted == stored) return stored;
  throw DataError(name + ": a " + kind + " image in " + (wanted == 1 ? "a " : "an ") +
                  set_name(wanted) + " set (the set's " +
                  "channels come from its first image, or --channels); convert it to " +
                  set_name(wanted) + " or leave it out (--skip-bad)");
}

void check_size(std::int64_t w, std::int64_t h, const std::string& name) {
  if (w < 1 || h < 1 || w * h > kMaxPixels)
    throw DataError(name + ": implausible image size " + std::to_string(w) + "x" +
                    std::to_string(h));
}

// Interleaved HWC (what the decoders give) to planar CHW. Built for AVX2 as well (chosen at load
// time where the CPU has it): the stride-3 split vectorises there, not with the x86-64 baseline.
DDP_ALSO_AVX2 Image to_planar(const std::vector<std::uint8_t>& hwc, std::int64_t c, std::int64_t h,
                              std::int64_t w, std::int64_t stride_c) {
  Image img{c, h, w, std::vector<std::uint8_t>(static_cast<std::size_t>(c * h * w))};
  const std::int64_t plane = h * w;
  if (c == 3 && stride_c == 3) {  // the common case, a pointer walk (a loader thread's hot loop)
    const std::uint8_t* src = hwc.data();
    std::uint8_t *r = img.pixels.data(), *g = r + plane, *b = g + plane;
    for (std::int64_t p = 0; p < plane; ++p, src += 3) {
      r[p] = src[0];
      g[p] = src[1];
      b[p] = src[2];
    }
    return img;
  }
  if (c == 1 && stride_c == 1) {
    std::copy(hwc.begin(), hwc.begin() + plane * c, img.pixels.begin());
    return img;
  }
  for (std::int64_t p = 0; p < plane; ++p)
    for (std::int64_t k = 0; k < c; ++k)
      img.pixels[static_cast<std::size_t>(k * plane + p)] =
          hwc[static_cast<std::size_t>(p * stride_c + k)];
  return img;
}

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

// Decodes at num/denom of the stored size (TurboJPEG's DCT scaling; 1/1 is the plain decode).
Image decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                  tjscalingfactor scale = {1, 1}) {
  std::unique_ptr<void, TjDeleter> tj(tjInitDecompress());
  if (!tj) throw DataError(name + ": cannot start the JPEG decoder: " + tjGetErrorStr2(nullptr));
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(tj.get(), bytes.data(), size, &w, &h, &subsamp, &colorspace) != 0)
    throw DataError(name + ": corrupt JPEG (" + tjGetErrorStr2(tj.get()) + ")");
  check_size(w, h, name);
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    throw DataError(name +
                    ": a CMYK JPEG; convert it to RGB (e.g. `convert in.jpg -colorspace "
                    "sRGB out.jpg`) or leave it out (--skip-bad)");
  const int stored = colorspace == TJCS_GRAY ? 1 : 3;
  const int c = check_channels(stored, channels, name, stored == 1 ? "grey" : "colour");
  w = TJSCALED(w, scale);
  h = TJSCALED(h, scale);
  std::vector<std::uint8_t> hwc(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) *
                                static_cast<std::size_t>(c));
  // Flags 0: libjpeg's accurate integer IDCT (JDCT_ISLOW) and fancy (smooth) upsampling, which
  // are Pillow's defaults; a warning (e.g. a truncated file) fails like an error, as PIL does.
  if (tjDecompress2(tj.get(), bytes.data(), size, hwc.data(), w, 0, h,
                    c == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0)
    throw DataError(name + ": corrupt JPEG (" + tjGetErrorStr2(tj.get()) + ")");
  return to_planar(hwc, c, h, w, c);
}

struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  ~PngImage() { png_image_free(&image); }
};

Image decode_png(std::span<const std::uint8_t> bytes, const std::string& name, int channels) {
  PngImage p;
  png_image& img = p.image;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size()))
    throw DataError(name + ": corrupt PNG (libpng: " + img.message + ")");
  check_size(img.width, img.height, name);
  if (img.format & PNG_FORMAT_FLAG_LINEAR)
    throw DataError(name +
                    ": a 16-bit PNG; convert it to 8 bits per channel or leave it out "
                    "(--skip-bad)");
  const int stored = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  const int c = check_channels(stored, channels, name, stored == 1 ? "grey" : "colour");
  // An alpha channel is read and then dropped (not composited), as PIL's convert("RGB") does.
  const bool alpha = img.format & PNG_FORMAT_FLAG_ALPHA;
  img.format = c == 1 ? (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY)
                      : (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB);
  const std::int64_t stride = c + (alpha ? 1 : 0);
  std::vector<std::uint8_t> hwc(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, hwc.data(), 0, nullptr))
    throw DataError(name + ": corrupt PNG (libpng: " + img.message + ")");
  return to_planar(hwc, c, img.height, img.width, stride);
}

}  // namespace

std::pair<std::int64_t, std::int64_t> image_size(std::span<const std::uint8_t> bytes,
                                                 const std::string& name) {
  if (is_jpeg(bytes)) {
    std::unique_ptr<void, TjDeleter> tj(tjInitDecompress());
    if (!tj) throw DataError(name + ": cannot start the JPEG decoder: " + tjGetErrorStr2(nullptr));
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(tj.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), &w,
                            &h, &subsamp, &colorspace) != 0)
      throw DataError(name + ": corrupt JPEG (" + tjGetErrorStr2(tj.get()) + ")");
    check_size(w, h, name);
    return {h, w};
  }
  if (is_png(bytes)) {
    PngImage p;
    if (!png_image_begin_read_from_memory(&p.image, bytes.data(), bytes.size()))
      throw DataError(name + ": corrupt PNG (libpng: " + p.image.message + ")");
    check_size(p.image.width, p.image.height, name);
    return {p.image.height, p.image.width};
  }
  return {0, 0};  // decode_image() names the problem
}

Image decode_jpeg_scaled(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                         int num, int denom) {
  if (!is_jpeg(bytes)) throw DataError(name + ": scaled decoding needs a JPEG");
  return decode_jpeg(bytes, name, channels, tjscalingfactor{num, denom});
}

std::vector<std::pair<int, int>> jpeg_scaling_factors() {
  int n = 0;
  const tjscalingfactor* f = tjGetScalingFactors(&n);
  std::vector<std::pair<int, int>> out;
  for (int i = 0; f != nullptr && i < n; ++i) out.emplace_back(f[i].num, f[i].denom);
  return out;
}

bool is_jpeg(std::span<const std::uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

bool is_png(std::span<const std::uint8_t> b) {
  return b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0;
}

Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name, int channels) {
  if (is_jpeg(bytes)) return decode_jpeg(bytes, name, channels);
  if (is_png(bytes)) return decode_png(bytes, name, channels);
  throw DataError(name + ": neither a JPEG nor a PNG (" +
                  (bytes.empty() ? std::string("the file is empty")
                                 : "its first bytes are not a JPEG or PNG signature") +
                  ")");
}

}  // namespace ddp::data
