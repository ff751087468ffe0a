#pragma once
// RAII owners of the CUDA, cuDNN and cuBLAS handles the backend uses: one template, one alias per
// handle type, one make_* function per creation call (each checked). Destruction ignores errors
// (a destructor must not throw, and after a fatal error the driver may refuse everything).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <utility>

#include "cuda_check.hpp"

namespace ddp::backend::cuda {

template <class H, auto Destroy>
class Handle {
 public:
  Handle() = default;
  explicit Handle(H h) : h_(h) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, H{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  H get() const { return h_; }
  operator H() const { return h_; }  // NOLINT: handles are passed straight to the C APIs
  explicit operator bool() const { return h_ != H{}; }
  void reset() {
    if (h_ != H{}) (void)Destroy(h_);
    h_ = H{};
  }

 private:
  H h_{};
};

using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;
using CudnnHandle = Handle<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Handle<cublasHandle_t, cublasDestroy>;
using TensorDesc = Handle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Handle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Handle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Handle<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using ActivationDesc = Handle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// A stream that does not synchronise with the legacy default stream.
inline Stream make_stream() {
  cudaStream_t s = nullptr;
  DDP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}
// An event for ordering (no timing: cheaper to record and wait on).
inline Event make_event(bool timing = false) {
  cudaEvent_t e = nullptr;
  DDP_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}
inline CudnnHandle make_cudnn() {
  cudnnHandle_t h = nullptr;
  DDP_CUDA_CHECK(cudnnCreate(&h));
  return CudnnHandle(h);
}
inline CublasHandle make_cublas() {
  cublasHandle_t h = nullptr;
  DDP_CUDA_CHECK(cublasCreate(&h));
  return CublasHandle(h);
}
inline TensorDesc make_tensor_desc() {
  cudnnTensorDescriptor_t d = nullptr;
  DDP_CUDA_CHECK(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}
inline FilterDesc make_filter_desc() {
  cudnnFilterDescriptor_t d = nullptr;
  DDP_CUDA_CHECK(cudnnCreateFilterDescriptor(&d));
  return FilterDesc(d);
}
inline ConvDesc make_conv_desc() {
  cudnnConvolutionDescriptor_t d = nullptr;
  DDP_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&d));
  return ConvDesc(d);
}
inline PoolDesc make_pool_desc() {
  cudnnPoolingDescriptor_t d = nullptr;
  DDP_CUDA_CHECK(cudnnCreatePoolingDescriptor(&d));
  return PoolDesc(d);
}
inline ActivationDesc make_activation_desc() {
  cudnnActivationDescriptor_t d = nullptr;
  DDP_CUDA_CHECK(cudnnCreateActivationDescriptor(&d));
  return ActivationDesc(d);
}

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    DDP_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device)
      DDP_CUDA_CHECK(cudaSetDevice(device));
    else
      previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// NCHW float tensor descriptor; throws when an extent does not fit cuDNN's int.
void set_tensor_4d(cudnnTensorDescriptor_t d, std::int64_t n, std::int64_t c, std::int64_t h,
                   std::int64_t w, cudnnDataType_t type = CUDNN_DATA_FLOAT);
// Narrowing to int for the C APIs, with a clear error instead of a silent wrap-around.
int to_int(std::int64_t v, const char* what);

}  // namespace ddp::backend::cuda
