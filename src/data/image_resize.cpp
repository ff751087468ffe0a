#include "ddp/data/image_resize.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

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

std::uint8_t clip8(std::int64_t v) {
  if (v >= (std::int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<std::uint8_t>(v >> kPrecisionBits);
}

// Resamples one plane along one axis: `n_lines` lines of `in_len` pixels, stepping `pixel_step`
// between pixels of a line and `line_step` between lines (in and out alike).
void resample(const std::uint8_t* in, std::uint8_t* out, const Coeffs& c, std::int64_t out_len,
              std::int64_t n_lines, std::int64_t in_pixel_step, std::int64_t in_line_step,
              std::int64_t out_pixel_step, std::int64_t out_line_step) {
  for (std::int64_t line = 0; line < n_lines; ++line) {
    for (std::int64_t xx = 0; xx < out_len; ++xx) {
      const std::int64_t xmin = c.bounds[static_cast<std::size_t>(xx * 2)];
      const std::int64_t xmax = c.bounds[static_cast<std::size_t>(xx * 2 + 1)];
      const std::int32_t* k = &c.k[static_cast<std::size_t>(xx * c.ksize)];
      std::int32_t ss = 1 << (kPrecisionBits - 1);  // Pillow sums in 32-bit int
      for (std::int64_t x = 0; x < xmax; ++x)
        ss +=
            static_cast<std::int32_t>(in[line * in_line_step + (x + xmin) * in_pixel_step]) * k[x];
      out[line * out_line_step + xx * out_pixel_step] = clip8(ss);
    }
  }
}

}  // namespace

Image resize_bilinear(const Image& in, std::int64_t height, std::int64_t width) {
  if (in.height == height && in.width == width) return in;
  const std::int64_t c = in.channels;
  // Horizontal pass (skipped when the width stays), then vertical, as Pillow orders them.
  Image mid = in;
  if (width != in.width) {
    mid = Image{c, in.height, width,
                std::vector<std::uint8_t>(static_cast<std::size_t>(c * in.height * width))};
    const Coeffs hc = precompute(in.width, width);
    for (std::int64_t k = 0; k < c; ++k)
      resample(in.pixels.data() + k * in.height * in.width,
               mid.pixels.data() + k * in.height * width, hc, width, in.height, 1, in.width, 1,
               width);
  }
  if (height == in.height) return mid;
  Image out{c, height, width,
            std::vector<std::uint8_t>(static_cast<std::size_t>(c * height * width))};
  const Coeffs vc = precompute(in.height, height);
  for (std::int64_t k = 0; k < c; ++k)
    resample(mid.pixels.data() + k * in.height * width, out.pixels.data() + k * height * width, vc,
             height, width, width, 1, width, 1);
  return out;
}

}  // namespace ddp::data
