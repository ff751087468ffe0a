#pragma once
// A minimal float32 tensor: a shape, a device and a pointer that either owns its storage or views
// someone else's (the flat parameter/gradient buffers). Nothing clever, on purpose. A tensor whose
// device is cuda holds device memory: only backend ops and Backend::upload/download touch it.
#include <cstdint>
#include <memory>

#include "ddp/shape.hpp"

namespace ddp {

enum class Device { cpu, cuda };

class Tensor {
 public:
  Tensor() = default;

  // Owning, 64-byte aligned, zero-filled host tensor.
  static Tensor zeros(Shape shape);
  // Owning tensor over storage allocated elsewhere (a backend's device memory): `storage` keeps
  // it alive and frees it with its own deleter.
  static Tensor adopt(std::shared_ptr<float[]> storage, Shape shape, Device device) {
    Tensor t;
    t.data_ = storage.get();
    t.storage_ = std::move(storage);
    t.shape_ = std::move(shape);
    t.device_ = device;
    return t;
  }
  // Non-owning view of memory owned elsewhere.
  static Tensor view(float* data, Shape shape, Device device = Device::cpu) {
    Tensor t;
    t.data_ = data;
    t.shape_ = std::move(shape);
    t.device_ = device;
    return t;
  }

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return shape_.numel(); }
  Device device() const { return device_; }
  bool empty() const { return data_ == nullptr; }

  // A view of the same memory with another shape of equal or smaller element count.
  Tensor reshaped(Shape shape) const;
  // A view of the first n entries along the leading (batch) axis.
  Tensor first(std::int64_t n) const;

 private:
  std::shared_ptr<float[]> storage_;
  float* data_ = nullptr;
  Shape shape_;
  Device device_ = Device::cpu;
};

}  // namespace ddp
