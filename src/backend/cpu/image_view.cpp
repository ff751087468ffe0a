// Test-time augmentation views of image batches (Backend::image_view): a translation with the
// borders reflected, as torch.nn.functional.pad(x, mode='reflect') followed by a crop gives it, and
// an optional horizontal flip of the translated image.
#include "cpu_kernels.hpp"

namespace ddp::backend::cpu {
namespace {

// PyTorch's 'reflect' padding: index -1 reads 1, index n reads n - 2 (the edge is not repeated).
inline std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

}  // namespace

void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t dy,
                std::int64_t dx, bool flip, const float* x, float* y) {
  const std::int64_t planes = n * c;
#pragma omp parallel for if (planes * h * w >= (1 << 16)) schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* src = x + p * h * w;
    float* dst = y + p * h * w;
    for (std::int64_t r = 0; r < h; ++r) {
      const float* srow = src + reflect(r + dy, h) * w;
      float* drow = dst + r * w;
      for (std::int64_t col = 0; col < w; ++col)
        drow[col] = srow[reflect((flip ? w - 1 - col : col) + dx, w)];
    }
  }
}

}  // namespace ddp::backend::cpu
