#pragma once
// A buffer in a backend's memory with a host mirror, for state that lives on the device while
// training but is read and written on the host now and then: the model's parameters and buffers
// and the optimizer's state (initialisation, broadcasts over MPI, snapshots, digests). On the CPU
// backend the mirror is the buffer itself and pull/push cost nothing.
#include <span>

#include "ddp/backend/backend.hpp"

namespace ddp::backend {

class Mirrored {
 public:
  Mirrored() = default;
  // `count` zero floats in be's memory, and their mirror.
  Mirrored(Backend& be, std::int64_t count);

  // Where the backend's ops read and write.
  const Tensor& device() const { return device_; }
  // The host copy: current after pull(); written on the host, it reaches the device by push().
  const Tensor& host() const { return host_; }
  std::span<float> host_span() const {
    return {host_.data(), static_cast<std::size_t>(host_.numel())};
  }
  std::span<float> device_span() const {
    return {device_.data(), static_cast<std::size_t>(device_.numel())};
  }
  bool shared() const { return device_.data() == host_.data(); }

  void pull() const;  // device -> host (waits for the work enqueued so far)
  void push() const;  // host -> device

 private:
  Backend* be_ = nullptr;
  Tensor device_, host_;
};

}  // namespace ddp::backend
