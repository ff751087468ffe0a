#pragma once
// What the ops of one CUDA backend share: the device, the compute and copy streams, the cuDNN and
// cuBLAS handles bound to the compute stream, the one cuDNN workspace, and scratch buffers. Ops
// hold a shared_ptr, so a layer's op stays valid even if it outlives the backend object.
//
// Everything here is used from one host thread (the backend's) and in compute-stream order, which
// is why one workspace and one set of scratch buffers can serve all layers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cuda_handles.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "kernels.cuh"

namespace ddp::backend::cuda {

class Context {
 public:
  Context(int device, const CudaOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  const CudaOptions& options() const { return options_; }
  const CudaDeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return compute_; }
  cudaStream_t copy_stream() const { return copy_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnMathType_t conv_math() const;
  // Tensor-core math may be chosen: TF32 allowed, or reduced precision (which is for tensor cores).
  bool tensor_ops_allowed() const;

  // The reduced precision of convolutions and linear layers, or nullptr for fp32.
  const Half* half() const { return half_ ? &*half_ : nullptr; }
  cudnnDataType_t half_cudnn() const;
  cudaDataType_t half_cublas() const;
  // Scratch for reduced-precision copies (2 bytes per element), slots 0-3, each grown to at least
  // `count` elements. Ops use them in compute-stream order, so all ops can share them.
  void* half_scratch(int slot, std::int64_t count);
  // A device flag for unscale_check and its pinned read-back.
  unsigned int* bad_flag() const { return bad_flag_.as<unsigned int>(); }
  unsigned int* bad_flag_host() const { return bad_host_.as<unsigned int>(); }

  // Waits for the compute stream.
  void sync() const;

  // The shared workspace: grown (never shrunk) to `bytes`, which the caller has checked against the
  // limit. Growing waits for the compute stream, since earlier kernels may still use the old one;
  // it happens only when an op meets a new shape.
  void reserve_workspace(std::size_t bytes);
  void* workspace() const { return workspace_.data(); }
  std::size_t workspace_size() const { return workspace_.bytes(); }

  // A device vector of at least n ones (bias gradients as GEMV with ones).
  const float* ones(std::int64_t n);

  // Device copies of small integer arrays that may live in host memory (labels, sample ids):
  // device and managed memory is used in place, pinned host memory through its device mapping,
  // pageable host memory is copied (the copy is staged before the call returns).
  const std::int32_t* device_labels(const std::int32_t* p, std::int64_t n);
  const std::int64_t* device_sample_ids(const std::int64_t* p, std::int64_t n);
  // How often device_sample_ids did not find its ids already on the device (tests).
  std::int64_t sample_id_uploads() const { return sample_id_uploads_; }

  // Scratch for the loss: log-probabilities, per-sample results, accumulators (slot 0: deferred,
  // slot 1: immediate), and the pinned buffer they are read back through.
  float* loss_logp(std::int64_t count);
  double* loss_per_sample(std::int64_t n);
  unsigned char* loss_flags(std::int64_t n);
  LossAccumulator* loss_acc(int slot) const { return loss_acc_.as<LossAccumulator>() + slot; }
  LossAccumulator* loss_host() const { return loss_host_.as<LossAccumulator>(); }

  // A tensor descriptor for element-wise cuDNN calls (a host-side object, set right before each
  // call: cuDNN reads it when the call is made).
  cudnnTensorDescriptor_t flat_desc() const { return flat_desc_; }

  // The DeviceQueue's events (timing or not), owned here, destroyed with the context.
  DeviceQueue::EventId new_event(bool timing);
  void release_event(DeviceQueue::EventId e);
  cudaEvent_t event(DeviceQueue::EventId e) const;

 private:
  // Grows `b` to at least `bytes` (with headroom), waiting for the compute stream first.
  void grow(DeviceBuffer& b, std::size_t bytes);
  template <class T>
  const T* device_ints(const T* p, std::int64_t n, DeviceBuffer& staging);
  // p itself when the device can read it (device, managed or mapped pinned memory), else nullptr:
  // pageable host memory, which must be copied.
  template <class T>
  const T* readable_in_place(const T* p) const;

  int device_;
  CudaOptions options_;
  CudaDeviceInfo info_;
  Stream compute_, copy_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  TensorDesc flat_desc_;
  DeviceBuffer workspace_, ones_, labels_, sample_ids_, logp_, per_sample_, flags_, loss_acc_;
  std::int64_t ones_count_ = 0;
  std::optional<Half> half_;
  std::array<DeviceBuffer, 4> half_scratch_;
  DeviceBuffer bad_flag_;
  PinnedBuffer bad_host_;
  PinnedBuffer loss_host_;
  // Pinned staging of pageable host arrays (a cudaMemcpyAsync straight from pageable memory may
  // synchronise with the stream): a small ring, each slot reused once its last copy is done.
  struct HostSlot {
    PinnedBuffer buffer;
    Event copied;
    bool used = false;
  };
  std::array<HostSlot, 4> host_slots_;
  std::size_t next_slot_ = 0;
  // The pageable ids whose copy sample_ids_ holds (in compute-stream order), to upload them once.
  std::vector<std::int64_t> sample_ids_held_;
  std::int64_t sample_id_uploads_ = 0;
  std::vector<Event> events_;  // DeviceQueue's, by EventId
  std::vector<bool> event_timing_;
  std::vector<DeviceQueue::EventId> spare_events_[2];  // released ones, plain and timing
};

}  // namespace ddp::backend::cuda
