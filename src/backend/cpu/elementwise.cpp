// Element-wise kernels of the CPU backend (the activations are in activation.cpp): plain loops the
// compiler vectorises, split over OpenMP threads only when the array is large enough to pay for the
// fork.
#include <algorithm>
#include <cmath>

#include "cpu_kernels.hpp"
#include "ddp/rng.hpp"

namespace ddp::backend::cpu {

void dropout_forward(std::int64_t n, std::int64_t per_sample, float p, std::uint64_t seed,
                     const std::int64_t* sample_ids, const float* x, float* mask, float* y) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  // Threshold on 24 random bits, as CounterRng::next_float does.
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 0x1.0p24);
#pragma omp parallel for if (n * per_sample >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t key = hash_words(seed, static_cast<std::uint64_t>(RngStream::dropout),
                                         static_cast<std::uint64_t>(sample_ids[i]));
    for (std::int64_t j = 0; j < per_sample; ++j) {
      const std::uint64_t bits = mix64(key + static_cast<std::uint64_t>(j)) >> 40;
      const float m = bits >= threshold ? keep_scale : 0.0f;
      mask[i * per_sample + j] = m;
      y[i * per_sample + j] = x[i * per_sample + j] * m;
    }
  }
}

void mul(std::int64_t count, const float* a, const float* b, float* y) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) y[i] = a[i] * b[i];
}

void fill(std::int64_t count, float value, float* y) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) y[i] = value;
}

void copy(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) y[i] = x[i];
}

void add(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) y[i] += x[i];
}

void lerp(std::int64_t count, const float* x, float weight, float* y) {
  // PyTorch's two-sided form (aten/src/ATen/native/Lerp.h), so an average matches torch's bitwise.
  const float rest = 1.0f - weight;
  if (weight < 0.5f) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) y[i] = y[i] + weight * (x[i] - y[i]);
  } else {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) y[i] = x[i] - (x[i] - y[i]) * rest;
  }
}

void copy_rows(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_pitch, float* y,
               std::int64_t y_pitch) {
#pragma omp parallel for if (rows * cols >= kParallelMin) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = x + r * x_pitch;
    float* dst = y + r * y_pitch;
#pragma omp simd
    for (std::int64_t i = 0; i < cols; ++i) dst[i] = src[i];
  }
}

bool unscale_check(std::int64_t count, float* g, float inv_scale) {
  // Counts instead of branching so the loop vectorises; x - x is 0 exactly when x is finite.
  std::int64_t bad = 0;
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static) reduction(+ : bad)
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = g[i];
    bad += (v - v) != 0.0f;
    g[i] = v * inv_scale;
  }
  return bad == 0;
}

}  // namespace ddp::backend::cpu
