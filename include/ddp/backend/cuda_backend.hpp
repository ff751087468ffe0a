#pragma once
// The CUDA backend: cuDNN for convolution, pooling, activation, batch norm and softmax; cuBLAS for
// linear layers; small CUDA kernels for the loss, dropout, optimizer updates and element-wise work.
// Everything a backend does is enqueued on its one compute stream of one GPU.
//
// This header needs no CUDA header: host code includes it whether or not the backend was built.
// The backend is the plugin libddp_cuda.so (ddp/plugin/cuda_plugin.hpp). Without it (not built,
// or no CUDA libraries on this node) every function below exists: cuda_unavailable_reason() says
// why, cuda_versions() returns "", make_cuda_backend() and the buffers throw ddp::SystemError.
//
// Memory. Every float* passed to a CudaBackend op is device memory of the backend's GPU (or CUDA
// managed memory). Two exceptions accept host or device memory alike: the labels of softmax_xent
// and the sample_ids of dropout_forward (small integer arrays that come from the data loader).
// Pageable host arrays are copied (the caller may reuse them once the call returns); pinned host
// arrays are read in place by the kernels, so, like device memory, they must stay unchanged until
// the compute stream has passed the call.
//
// Ordering. Ops are asynchronous: they return once enqueued, in order, on the compute stream.
// softmax_xent returns its sums and so waits for the stream; softmax_xent_accumulate does not.
// Freeing device memory (a tensor from alloc() going away) waits for the device (cudaFree).
// synchronize() waits for everything. A backend is used by one host thread at a time.
//
// Errors. CUDA, cuDNN and cuBLAS failures throw ddp::SystemError naming the call and the status
// (cudaGetErrorString / cudnnGetErrorString / the cuBLAS status name).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/device_queue.hpp"

namespace ddp::backend {

// True when the CUDA plugin is loaded (it may still find no GPU at run time).
bool cuda_built();

// Why device = "cuda" cannot run here ("" when at least one usable GPU is visible): the plugin is
// missing or did not load (the loader's message), there is no driver or it is too old, no GPU is
// visible (CUDA_VISIBLE_DEVICES), ... Never throws, never crashes on a machine without a GPU.
std::string cuda_unavailable_reason();

// GPUs this process sees (cudaGetDeviceCount; 0 when none or when the plugin is not loaded).
int cuda_device_count();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::string uuid;        // "GPU-1d2c...": the same GPU has the same UUID in every process
  std::string pci_bus_id;  // "0000:3b:00.0"
  int cc_major = 0, cc_minor = 0;
  std::size_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};
// Throws ddp::SystemError when the device does not exist or cannot be queried.
CudaDeviceInfo cuda_device_info(int device);

// Library versions for `ddp_train --version`, e.g. "CUDA runtime 13.0 (driver 13.0), cuDNN 9.19.0,
// cuBLAS 13.0.2, NCCL 2.28.9"; the driver reads "no driver" without one. "" without the plugin.
std::string cuda_versions();

// The precision of convolutions and linear layers (their inputs and weights are rounded to it; the
// products accumulate in fp32 on tensor cores, outputs and gradients return to fp32). Everything
// else - activations, batch norm, the loss, master weights and optimizer state - stays fp32.
enum class Precision { fp32, bf16, fp16 };

struct CudaOptions {
  Precision precision = Precision::fp32;
  // Upper bound of the one cuDNN workspace all layers of a backend share; a convolution algorithm
  // that needs more is not chosen.
  std::size_t workspace_limit_bytes = std::size_t{256} << 20;
  // Allow TF32 tensor-core math (Ampere and later) for fp32 convolutions and GEMMs: 10-bit mantissa
  // products, PyTorch's default for cuDNN convolutions. Off: strict fp32 (FMA) everywhere.
  bool allow_tf32 = false;
  // Prefer deterministic cuDNN algorithms (each gives the same bits for the same inputs) whenever
  // one fits the workspace; otherwise the fastest is taken.
  bool deterministic = true;
  // Choose convolution algorithms by timing them once per shape and batch size (cudnnFind*,
  // PyTorch's cudnn.benchmark; cached for the backend's life): with `deterministic`, the fastest
  // deterministic one. Off: cuDNN's heuristics (cudnnGet*_v7), whose first deterministic entry
  // was measured 45x slower than the best for a 1x1 stride-2 bf16 backward (resnet50,
  // bench/results/2026-11-28-h200-baseline). Timed choices may differ run to run where two
  // algorithms are about as fast, and then so may the bits of a run; heuristics give the same
  // choice every time.
  bool benchmark = true;
  // Batch norm through cuDNN's legacy NCHW API instead of the backend's own kernels (which are
  // several times faster; kept for A/B timings, gpu_bench --bn cudnn).
  bool cudnn_batch_norm = false;
};

class CudaBackend : public Backend, public DeviceQueue {
 public:
  virtual int device_index() const = 0;
  virtual const CudaDeviceInfo& device_info() const = 0;
  // The compute stream (a cudaStream_t, as void* so that this header needs no CUDA headers).
  virtual void* compute_stream() const = 0;
  // Blocks until all work enqueued on the compute stream and the copy stream has finished.
  virtual void synchronize() = 0;
  // Enqueues `fn(arg)` on the compute stream (cudaLaunchHostFunc): it runs on a CUDA thread once
  // the work before it has finished, and the work after it waits for it. fn must not call CUDA.
  // What tests use to hold the stream at a point of their choosing.
  virtual void enqueue_host_function(void (*fn)(void*), void* arg) = 0;

  // Copies between host memory and device memory, ordered after the work already enqueued on the
  // compute stream; they return when the copy is complete.
  virtual void to_device(const void* host, void* device, std::size_t bytes) = 0;
  virtual void to_host(const void* device, void* host, std::size_t bytes) = 0;

  // Batches travel through the DeviceQueue interface: pinned slots copied on a copy stream beside
  // the compute stream, ordered by events (train::BatchFeed).

  // softmax_xent_accumulate (Backend) accumulates on the device; take_loss() waits for the stream.
  // alloc() returns device memory (cudaMalloc, zero-filled) that lives as long as the tensor;
  // upload()/download() are to_device()/to_host().

  // Bytes of the shared cuDNN workspace allocated so far (<= workspace_limit_bytes).
  virtual std::size_t workspace_bytes() const = 0;
  // Copies of pageable dropout sample ids made so far: one per micro-batch, however many dropout
  // layers read them (the later ones find them on the device already).
  virtual std::int64_t sample_id_uploads() const = 0;
};

// A backend on GPU `device` (an index among the visible devices). Makes `device` the calling
// thread's current device. Throws ddp::SystemError with cuda_unavailable_reason() when no GPU is
// usable, when `device` does not exist, and when this build has no kernels for its architecture.
std::unique_ptr<CudaBackend> make_cuda_backend(int device, const CudaOptions& options = {});

// Device memory, zero-filled, owned (cudaFree on destruction). Allocation makes `device` current.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  float* floats() const { return as<float>(); }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

// Page-locked host memory (cudaMallocHost), zero-filled, for asynchronous uploads. `device` is made
// current first, so that no context is created on another GPU.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(int device, std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept { swap(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    PinnedBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  void swap(PinnedBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ddp::backend
