// The CPU convolution with groups, dilation and rectangular geometry against a naive loop written
// from PyTorch's definition: out[n][o][i][j] = b[o] + sum over the input channels of o's group and
// the kernel of x[n][c][i*sh - ph + a*dh][j*sw - pw + b*dw] * w[o][c - group start][a][b]. The
// gradient checks (layer_gradcheck_test.cpp) show that backward matches forward; this shows that
// forward is the convolution PyTorch computes (which weights see which channels, where a dilated
// tap lands), and that the backward passes agree with the loop too. Batches of 70 span several
// of the op's slices of samples (32 per compute thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "gradcheck_util.hpp"

namespace ddp::backend {
namespace {

using ddp::testing::random_vector;

ConvGeom geom(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
              std::int64_t s, std::int64_t groups, std::int64_t sh = 1, std::int64_t sw = 1,
              std::int64_t ph = 0, std::int64_t pw = 0, std::int64_t dh = 1, std::int64_t dw = 1) {
  ConvGeom g;
  g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s, g.groups = groups;
  g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw, g.dil_h = dh, g.dil_w = dw;
  g.oh = (h + 2 * ph - (r - 1) * dh - 1) / sh + 1;
  g.ow = (w + 2 * pw - (s - 1) * dw - 1) / sw + 1;
  return g;
}

// Calls f(yi, wi, xi) for every (output element, kernel tap) pair that reads the input (not the
// padding): the output's, the weight's and the input's flat indices.
template <class F>
void for_each_tap(const ConvGeom& g, std::int64_t n, F f) {
  const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t o = 0; o < g.k; ++o)
      for (std::int64_t i = 0; i < g.oh; ++i)
        for (std::int64_t j = 0; j < g.ow; ++j)
          for (std::int64_t cc = 0; cc < cg; ++cc)
            for (std::int64_t a = 0; a < g.r; ++a)
              for (std::int64_t e = 0; e < g.s; ++e) {
                const std::int64_t row = i * g.stride_h - g.pad_h + a * g.dil_h;
                const std::int64_t col = j * g.stride_w - g.pad_w + e * g.dil_w;
                if (row < 0 || row >= g.h || col < 0 || col >= g.w) continue;
                const std::int64_t c = (o / kg) * cg + cc;
                const std::int64_t yi = ((b * g.k + o) * g.oh + i) * g.ow + j;
                f(yi, ((o * cg + cc) * g.r + a) * g.s + e, ((b * g.c + c) * g.h + row) * g.w + col);
              }
}

// max |a - b| / max |b|
double rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

void check(const ConvGeom& g, std::int64_t n) {
  const auto xn = static_cast<std::size_t>(n * g.c * g.h * g.w);
  const auto yn = static_cast<std::size_t>(n * g.k * g.oh * g.ow);
  const auto wn = static_cast<std::size_t>(g.k * (g.c / g.groups) * g.r * g.s);
  const auto x = random_vector(xn, 1), w = random_vector(wn, 2), b = random_vector(g.k, 3),
             dy = random_vector(yn, 4);

  std::vector<double> ry(yn), rdx(xn, 0.0), rdw(wn, 0.0), rdb(g.k, 0.0);
  for (std::size_t i = 0; i < yn; ++i)
    ry[i] = g.bias ? b[(i / static_cast<std::size_t>(g.oh * g.ow)) % g.k] : 0.0;
  for_each_tap(g, n, [&](std::int64_t yi, std::int64_t wi, std::int64_t xi) {
    ry[yi] += static_cast<double>(x[xi]) * w[wi];
    rdx[xi] += static_cast<double>(dy[yi]) * w[wi];
    rdw[wi] += static_cast<double>(dy[yi]) * x[xi];
  });
  for (std::size_t i = 0; i < yn; ++i)
    rdb[(i / static_cast<std::size_t>(g.oh * g.ow)) % g.k] += dy[i];

  auto be = make_cpu_backend();
  auto op = be->conv(g);
  std::vector<float> y(yn), dx(xn), dw(wn), db(g.k);
  op->forward(n, x.data(), w.data(), g.bias ? b.data() : nullptr, y.data());
  op->backward(n, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
               g.bias ? db.data() : nullptr);
  EXPECT_LE(rel_diff(y, ry), 1e-5) << "forward, batch " << n;
  EXPECT_LE(rel_diff(dx, rdx), 1e-5) << "input gradient, batch " << n;
  EXPECT_LE(rel_diff(dw, rdw), 1e-5) << "weight gradient, batch " << n;
  if (g.bias) EXPECT_LE(rel_diff(db, rdb), 1e-5) << "bias gradient, batch " << n;
}

TEST(ConvGroupedReference, TwoGroups) {
  for (std::int64_t n : {1, 70}) check(geom(4, 5, 5, 6, 3, 3, 2, 1, 1, 1, 1), n);
}

TEST(ConvGroupedReference, DepthwiseBlockedChannels) {
  // 32 channels: oneDNN's depthwise kernels on its 16-channel blocks.
  for (std::int64_t n : {1, 70}) check(geom(32, 9, 9, 32, 3, 3, 32, 2, 2, 1, 1), n);
}

TEST(ConvGroupedReference, DepthwiseFewChannelsNoBias) {
  ConvGeom g = geom(3, 8, 8, 3, 3, 3, 3, 1, 1, 1, 1);
  g.bias = false;
  check(g, 70);
}

TEST(ConvGroupedReference, DepthwiseChannelMultiplier2) {
  check(geom(4, 6, 6, 8, 3, 3, 4, 1, 1, 1, 1), 70);
}

TEST(ConvGroupedReference, GroupedAndDilated) {
  check(geom(6, 9, 9, 6, 3, 3, 3, 1, 1, 2, 2, 2, 2), 70);
}

TEST(ConvGroupedReference, RectangularKernelStridePaddingDilation) {
  check(geom(3, 9, 7, 4, 3, 2, 1, 2, 1, 1, 2, 1, 2), 70);
}

}  // namespace
}  // namespace ddp::backend
