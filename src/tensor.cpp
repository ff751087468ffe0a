#include "ddp/tensor.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "ddp/error.hpp"

namespace ddp {
namespace {

// From this size on, storage is mapped pages (page-aligned, so 64-byte aligned too).
constexpr std::size_t kMappedBytes = std::size_t{1} << 20;

}  // namespace

Tensor Tensor::zeros(Shape shape) {
  const std::int64_t n = shape.numel();
  // 64-byte alignment matches AVX-512 loads and oneDNN's preferred alignment.
  const std::size_t bytes = ((static_cast<std::size_t>(n) * sizeof(float) + 63) / 64) * 64;
  Tensor t;
  if (bytes >= kMappedBytes) {
    // Fresh anonymous pages read as zeros and are only backed once touched: the activations of a
    // largest batch (hundreds of MiB for a ResNet) cost nothing until a batch that size runs,
    // where a memset touched every page at start-up (most of a small run's CPU time).
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    t.storage_ =
        std::shared_ptr<float[]>(static_cast<float*>(p), [bytes](float* q) { munmap(q, bytes); });
  } else {
    void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    t.storage_ = std::shared_ptr<float[]>(static_cast<float*>(p), [](float* q) { std::free(q); });
  }
  t.data_ = t.storage_.get();
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape.numel() > numel())
    throw Error("internal: cannot reshape tensor " + shape_.str() + " to larger " + shape.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::first(std::int64_t n) const {
  if (shape_.rank() == 0 || n > shape_[0] || n < 0)
    throw Error("internal: cannot take " + std::to_string(n) + " rows of tensor " + shape_.str());
  Tensor t = *this;
  t.shape_[0] = n;
  return t;
}

}  // namespace ddp
