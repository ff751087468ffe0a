#include "ddp/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "ddp/error.hpp"

namespace ddp {

Tensor Tensor::zeros(Shape shape) {
  const std::int64_t n = shape.numel();
  // 64-byte alignment matches AVX-512 loads and oneDNN's preferred alignment.
  const std::size_t bytes = ((static_cast<std::size_t>(n) * sizeof(float) + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  Tensor t;
  t.storage_ = std::shared_ptr<float[]>(static_cast<float*>(p), [](float* q) { std::free(q); });
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
