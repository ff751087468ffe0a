#pragma once
// Tensor shapes: a short list of extents, NCHW for images.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace ddp {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  std::size_t rank() const { return dims_.size(); }
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  const std::vector<std::int64_t>& dims() const { return dims_; }

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : dims_) n *= d;
    return n;
  }
  // The same shape with a new leading (batch) extent prepended.
  Shape with_batch(std::int64_t n) const {
    std::vector<std::int64_t> d{n};
    d.insert(d.end(), dims_.begin(), dims_.end());
    return Shape(std::move(d));
  }
  // "3x32x32"
  std::string str() const {
    std::string s;
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += 'x';
      s += std::to_string(dims_[i]);
    }
    return s.empty() ? "scalar" : s;
  }
  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<std::int64_t> dims_;
};

}  // namespace ddp
