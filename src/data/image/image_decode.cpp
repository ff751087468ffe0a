#include "ddp/data/image_decode.hpp"

#if DDP_HAVE_LEPTONICA
#include <leptonica/allheaders.h>
#endif
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>

#include "ddp/cpu_clones.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// Decoded sizes beyond this are refused before allocating (a corrupt header can claim 65535^2).
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 28;

// The channels to decode an image that stores `stored` into a set of `wanted` (0: the image's
// own). A grey image in an RGB set is decoded grey and then converted (to_rgb), as torchvision's
// ImageFolder does (PIL's convert("RGB") repeats the grey value); a colour image in a grey set is
// refused, naming both.
int check_channels(int stored, int wanted, const std::string& name) {
  if (wanted == 0 || wanted == stored || (stored == 1 && wanted == 3)) return stored;
  throw DataError(name + ": a colour image in a grey set (the set's channels come from its " +
                  "first image, or --channels); pack with --channels 3 to keep colour, " +
                  "convert it to grey, or leave it out (--skip-bad)");
}

// A grey image as RGB: the grey plane three times (PIL's convert("RGB") of an "L" image).
Image to_rgb(Image grey) {
  const auto plane = static_cast<std::ptrdiff_t>(grey.height * grey.width);
  grey.pixels.resize(static_cast<std::size_t>(3 * plane));
  std::copy_n(grey.pixels.begin(), plane, grey.pixels.begin() + plane);
  std::copy_n(grey.pixels.begin(), plane, grey.pixels.begin() + 2 * plane);
  grey.channels = 3;
  return grey;
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
  const int c = check_channels(stored, channels, name);
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
  const int c = check_channels(stored, channels, name);
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

#if !DDP_HAVE_LEPTONICA
// The formats besides JPEG and PNG by their first bytes, for a message where this build cannot
// decode them; nullptr for none of them.
const char* other_format_name(std::span<const std::uint8_t> b) {
  const auto starts = [&](std::string_view magic) {
    return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
  };
  if (starts("BM")) return "BMP";
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return "PNM (PPM/PGM)";
  if (starts(std::string_view("II*\0", 4)) || starts(std::string_view("MM\0*", 4))) return "TIFF";
  if (starts("RIFF") && b.size() >= 12 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return "WebP";
  if (starts("GIF8")) return "GIF";
  return nullptr;
}
#else
// The other formats of torchvision's IMG_EXTENSIONS (BMP, PPM/PGM, TIFF, WebP), and GIF (which PIL
// opens whatever the file's name), through Leptonica, which reads them with libtiff, libwebp and
// giflib or its own BMP/PNM readers. The pixels are those of PIL's convert("RGB") / "L".
struct PixDeleter {
  void operator()(PIX* p) const { pixDestroy(&p); }
};
using PixPtr = std::unique_ptr<PIX, PixDeleter>;

// Leptonica prints its errors on stderr unless told not to; ours name the file instead.
void quiet_leptonica() {
  static std::once_flag once;
  std::call_once(once, [] { setMsgSeverity(L_SEVERITY_NONE); });
}

// The Leptonica format of the bytes when it is one we decode through it, else IFF_UNKNOWN.
int leptonica_format(std::span<const std::uint8_t> b) {
  if (b.size() < 12) return IFF_UNKNOWN;  // findFileFormatBuffer reads the first 12 bytes
  l_int32 f = IFF_UNKNOWN;
  if (findFileFormatBuffer(b.data(), &f) != 0) return IFF_UNKNOWN;
  const bool ours =
      f == IFF_BMP || f == IFF_PNM || f == IFF_GIF || f == IFF_WEBP || L_FORMAT_IS_TIFF(f);
  return ours ? f : IFF_UNKNOWN;
}

const char* leptonica_format_name(int f) {
  if (f == IFF_BMP) return "BMP";
  if (f == IFF_PNM) return "PNM";
  if (f == IFF_GIF) return "GIF";
  if (f == IFF_WEBP) return "WebP";
  return "TIFF";
}

// (height, width) from the header, checked before anything is allocated.
std::pair<std::int64_t, std::int64_t> leptonica_size(std::span<const std::uint8_t> bytes,
                                                     const std::string& name, int format) {
  quiet_leptonica();
  l_int32 f = 0, w = 0, h = 0, bps = 0, spp = 0, cmap = 0;
  if (pixReadHeaderMem(bytes.data(), bytes.size(), &f, &w, &h, &bps, &spp, &cmap) != 0)
    throw DataError(name + ": corrupt " + leptonica_format_name(format) + " (its header cannot " +
                    "be read)");
  check_size(w, h, name);
  return {h, w};
}

Image decode_leptonica(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                       int format) {
  const std::string kind = leptonica_format_name(format);
  leptonica_size(bytes, name, format);
  PixPtr pix(pixReadMem(bytes.data(), bytes.size()));
  if (!pix)
    throw DataError(name + ": corrupt or unsupported " + kind + " (Leptonica cannot read it)");
  // A palette: grey when every entry is, else colour (as PIL's "P" mode converts).
  if (pixGetColormap(pix.get()) != nullptr)
    pix.reset(pixRemoveColormap(pix.get(), REMOVE_CMAP_BASED_ON_SRC));
  if (pix && pixGetDepth(pix.get()) < 8 && pixGetColormap(pix.get()) == nullptr)
    pix.reset(pixConvertTo8(pix.get(), 0));  // 1, 2, 4 bits of grey (1 bit: 1 is black)
  if (!pix) throw DataError(name + ": cannot convert its " + kind + " pixels");
  const l_int32 depth = pixGetDepth(pix.get());
  if (depth != 8 && depth != 32)
    throw DataError(name + ": a " + std::to_string(depth) + "-bit " + kind +
                    " image; convert it to 8 bits per channel or leave it out (--skip-bad)");
  const int stored = depth == 8 ? 1 : 3;
  const int c = check_channels(stored, channels, name);
  const std::int64_t w = pixGetWidth(pix.get()), h = pixGetHeight(pix.get());
  check_size(w, h, name);
  Image img{c, h, w, std::vector<std::uint8_t>(static_cast<std::size_t>(c * h * w))};
  const l_uint32* data = pixGetData(pix.get());
  const l_int32 wpl = pixGetWpl(pix.get());
  const std::int64_t plane = h * w;
  for (std::int64_t y = 0; y < h; ++y) {
    const l_uint32* line = data + y * wpl;
    std::uint8_t* out = img.pixels.data() + y * w;
    for (std::int64_t x = 0; x < w; ++x) {
      if (c == 1) {
        out[x] = static_cast<std::uint8_t>(GET_DATA_BYTE(line, x));
      } else {  // RGBA words; an alpha channel is dropped, as convert("RGB") does
        const l_uint32 px = line[x];
        out[x] = static_cast<std::uint8_t>(px >> L_RED_SHIFT);
        out[x + plane] = static_cast<std::uint8_t>(px >> L_GREEN_SHIFT);
        out[x + 2 * plane] = static_cast<std::uint8_t>(px >> L_BLUE_SHIFT);
      }
    }
  }
  return img;
}
#endif  // DDP_HAVE_LEPTONICA

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
#if DDP_HAVE_LEPTONICA
  if (const int f = leptonica_format(bytes); f != IFF_UNKNOWN)
    return leptonica_size(bytes, name, f);
#endif
  return {0, 0};  // decode_image() names the problem
}

Image decode_jpeg_scaled(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                         int num, int denom) {
  if (!is_jpeg(bytes)) throw DataError(name + ": scaled decoding needs a JPEG");
  Image img = decode_jpeg(bytes, name, channels, tjscalingfactor{num, denom});
  return channels == 3 && img.channels == 1 ? to_rgb(std::move(img)) : img;
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

Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name, int channels,
                   bool* converted) {
  Image img;
  if (is_jpeg(bytes)) {
    img = decode_jpeg(bytes, name, channels);
  } else if (is_png(bytes)) {
    img = decode_png(bytes, name, channels);
#if DDP_HAVE_LEPTONICA
  } else if (const int f = leptonica_format(bytes); f != IFF_UNKNOWN) {
    img = decode_leptonica(bytes, name, channels, f);
#else
  } else if (const char* kind = other_format_name(bytes)) {
    throw DataError(name + ": a " + kind +
                    " image, which this ddp_train cannot decode: it was built without Leptonica "
                    "(apt-get install libleptonica-dev, then build again)");
#endif
  } else {
    throw DataError(name + ": not an image we can read (" +
                    (bytes.empty() ? std::string("the file is empty")
                                   : "its first bytes are not those of a JPEG, PNG, BMP, PPM/PGM, "
                                     "TIFF, WebP or GIF file") +
                    ")");
  }
  const bool convert = channels == 3 && img.channels == 1;
  if (converted) *converted = convert;
  return convert ? to_rgb(std::move(img)) : img;
}

}  // namespace ddp::data
