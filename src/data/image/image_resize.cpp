#include "ddp/data/image_resize.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ddp/cpu_clones.hpp"

namespace ddp::data {
namespace {

// Pillow's Resample.c: coefficients in double, normalised per output pixel, then rounded to
// fixed point with PRECISION_BITS fractional bits; sums start at one half and are clipped.
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Coeffs {
  std::int64_t ksize = 0;
  std::vector<std::int64_t> bounds;  // per output pixel: first input pixel, count
  std::vector<std::int32_t> k;       // per output pixel: ksize weights
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

Coeffs precompute(std::int64_t in_size, std::int64_t out_size) {
  const double scale =
      static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;  // the bilinear filter's support is 1
  Coeffs c;
  c.ksize = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<std::size_t>(out_size * 2));
  c.k.assign(static_cast<std::size_t>(out_size * c.ksize), 0);
  std::vector<double> w(static_cast<std::size_t>(c.ksize));
  for (std::int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    auto xmin = static_cast<std::int64_t>(center - support + 0.5);
    xmin = std::max<std::int64_t>(xmin, 0);
    auto xmax = static_cast<std::int64_t>(center + support + 0.5);
    xmax = std::min(xmax, in_size) - xmin;
    double ww = 0.0;
    for (std::int64_t x = 0; x < xmax; ++x) {
      w[static_cast<std::size_t>(x)] =
          triangle((static_cast<double>(x + xmin) - center + 0.5) * ss);
      ww += w[static_cast<std::size_t>(x)];
    }
    for (std::int64_t x = 0; x < xmax; ++x) {
      double v = w[static_cast<std::size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double fixed = v * (1 << kPrecisionBits);
      c.k[static_cast<std::size_t>(xx * c.ksize + x)] =
          static_cast<std::int32_t>(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    c.bounds[static_cast<std::size_t>(xx * 2)] = xmin;
    c.bounds[static_cast<std::size_t>(xx * 2 + 1)] = xmax;
  }
  return c;
}

inline std::uint8_t clip8(std::int32_t v) {
  if (v >= (std::int32_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<std::uint8_t>(v >> kPrecisionBits);
}

// Horizontal pass over `planes` planes at once (they share the coefficients): each output pixel
// sums its taps, which lie side by side.
void resample_rows(const std::uint8_t* in, std::uint8_t* out, const Coeffs& c, std::int64_t in_w,
                   std::int64_t out_w, std::int64_t rows, std::int64_t planes) {
  const std::int64_t in_plane = in_w * rows, out_plane = out_w * rows;
  for (std::int64_t p0 = 0; p0 < planes; p0 += 3) {
    const std::int64_t n = std::min<std::int64_t>(3, planes - p0);
    for (std::int64_t y = 0; y < rows; ++y) {
      const std::uint8_t* l0 = in + p0 * in_plane + y * in_w;
      const std::uint8_t* l1 = n > 1 ? l0 + in_plane : l0;
      const std::uint8_t* l2 = n > 2 ? l1 + in_plane : l1;
      std::uint8_t* d0 = out + p0 * out_plane + y * out_w;
      std::uint8_t* d1 = n > 1 ? d0 + out_plane : d0;
      std::uint8_t* d2 = n > 2 ? d1 + out_plane : d1;
      for (std::int64_t xx = 0; xx < out_w; ++xx) {
        const std::int64_t first = c.bounds[static_cast<std::size_t>(xx * 2)];
        const auto taps = static_cast<int>(c.bounds[static_cast<std::size_t>(xx * 2 + 1)]);
        const std::int32_t* k = &c.k[static_cast<std::size_t>(xx * c.ksize)];
        const std::uint8_t *s0 = l0 + first, *s1 = l1 + first, *s2 = l2 + first;
        std::int32_t a0 = 1 << (kPrecisionBits - 1), a1 = a0, a2 = a0;  // Pillow: 32-bit int
        for (int t = 0; t < taps; ++t) {
          a0 += static_cast<std::int32_t>(s0[t]) * k[t];
          a1 += static_cast<std::int32_t>(s1[t]) * k[t];
          a2 += static_cast<std::int32_t>(s2[t]) * k[t];
        }
        // With fewer than 3 planes the spare sums repeat a real one (same pointer): harmless.
        d2[xx] = clip8(a2);
        d1[xx] = clip8(a1);
        d0[xx] = clip8(a0);
      }
    }
  }
}

// Vertical pass over one plane: an output row is a weighted sum of whole input rows, accumulated
// row by row (contiguous, vectorised; also built for AVX2, chosen at load time where the CPU has
// it). Integer sums: the same values as Pillow's column-wise loop.
DDP_ALSO_AVX2 void resample_columns(const std::uint8_t* in, std::uint8_t* out, const Coeffs& c,
                                    std::int64_t width, std::int64_t out_h,
                                    std::vector<std::int32_t>& acc) {
  acc.resize(static_cast<std::size_t>(width));
  for (std::int64_t yy = 0; yy < out_h; ++yy) {
    const std::int64_t first = c.bounds[static_cast<std::size_t>(yy * 2)];
    const std::int64_t taps = c.bounds[static_cast<std::size_t>(yy * 2 + 1)];
    const std::int32_t* k = &c.k[static_cast<std::size_t>(yy * c.ksize)];
    std::int32_t* a = acc.data();
    std::fill(acc.begin(), acc.end(), std::int32_t{1} << (kPrecisionBits - 1));
    for (std::int64_t t = 0; t < taps; ++t) {
      const std::uint8_t* row = in + (first + t) * width;
      const std::int32_t kt = k[t];
      for (std::int64_t x = 0; x < width; ++x) a[x] += static_cast<std::int32_t>(row[x]) * kt;
    }
    std::uint8_t* dst = out + yy * width;
    for (std::int64_t x = 0; x < width; ++x) dst[x] = clip8(a[x]);
  }
}

}  // namespace

Image resize_bilinear(const Image& in, std::int64_t height, std::int64_t width) {
  if (in.height == height && in.width == width) return in;
  const std::int64_t c = in.channels;
  // Horizontal pass (skipped when the width stays), then vertical, as Pillow orders them.
  const Image* src = &in;
  Image mid;
  if (width != in.width) {
    mid = Image{c, in.height, width,
                std::vector<std::uint8_t>(static_cast<std::size_t>(c * in.height * width))};
    const Coeffs hc = precompute(in.width, width);
    resample_rows(in.pixels.data(), mid.pixels.data(), hc, in.width, width, in.height, c);
    src = &mid;
  }
  if (height == in.height) return mid;  // the width changed (equal sizes returned above)
  Image out{c, height, width,
            std::vector<std::uint8_t>(static_cast<std::size_t>(c * height * width))};
  const Coeffs vc = precompute(in.height, height);
  std::vector<std::int32_t> acc;
  for (std::int64_t k = 0; k < c; ++k)
    resample_columns(src->pixels.data() + k * in.height * width,
                     out.pixels.data() + k * height * width, vc, width, height, acc);
  return out;
}

}  // namespace ddp::data
