// The CUDA backend's plumbing: error messages, availability (a clear reason instead of a crash on a
// machine without a GPU), device information, versions, and the device/pinned buffers.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_check.hpp"
#include "cuda_handles.hpp"
#include "ddp/backend/cuda_backend.hpp"

#ifndef DDP_CUDA_ARCHS
#define DDP_CUDA_ARCHS "unknown"
#endif

namespace ddp::backend {
namespace cuda {
namespace {

std::string where(const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  return std::string(" [") + (base ? base + 1 : file) + ":" + std::to_string(line) + "]";
}

std::string visible_devices_note() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v) return "";
  if (!*v) return "; CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU";
  return std::string("; CUDA_VISIBLE_DEVICES='") + v + "'";
}

std::string version_text(int major, int minor, int patch = -1) {
  std::string s = std::to_string(major);
  s += '.';
  s += std::to_string(minor);
  if (patch >= 0) {
    s += '.';
    s += std::to_string(patch);
  }
  return s;
}

// cudaRuntimeGetVersion / cudaDriverGetVersion encode 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return version_text(v / 1000, (v % 1000) / 10);
}

}  // namespace

const char* cublas_status_name(cublasStatus_t s) {
  return cublasGetStatusName(s);
}

std::string describe_cuda_error(cudaError_t e) {
  std::string s = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
  switch (e) {
    case cudaErrorMemoryAllocation:
      s += "; the GPU's memory is exhausted: use a smaller batch, or check with nvidia-smi whether "
           "other processes hold GPU memory";
      break;
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
      s += std::string("; this build has no code for this GPU (built for architectures ") +
           DDP_CUDA_ARCHS +
           "): rebuild with -DCMAKE_CUDA_ARCHITECTURES=<the GPU's compute capability, e.g. 80>";
      break;
    case cudaErrorInsufficientDriver:
      s += "; install an NVIDIA driver that supports this build's CUDA runtime, or update it";
      break;
    case cudaErrorDevicesUnavailable:
      s += "; the GPU is in exclusive-process or prohibited compute mode and busy or unavailable "
           "(nvidia-smi -q -d COMPUTE)";
      break;
    default:
      break;
  }
  return s;
}

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  // Clear the (non-sticky) error so that a caught exception leaves the runtime usable.
  (void)cudaGetLastError();
  throw SystemError(std::string("CUDA error: ") + call + " failed: " + describe_cuda_error(e) +
                    where(file, line));
}

void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  std::string msg = std::string("cuDNN error: ") + call + " failed: " + cudnnGetErrorString(s);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) msg += std::string(" (") + detail + ")";
  throw SystemError(msg + where(file, line));
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw SystemError(std::string("cuBLAS error: ") + call + " failed: " + cublasGetStatusName(s) +
                    " (" + cublasGetStatusString(s) + ")" + where(file, line));
}

int to_int(std::int64_t v, const char* what) {
  if (v < 0 || v > 0x7fffffff)
    throw Error(std::string("CUDA backend: ") + what + " = " + std::to_string(v) +
                " does not fit the int of the cuDNN/cuBLAS interfaces");
  return static_cast<int>(v);
}

void set_tensor_4d(cudnnTensorDescriptor_t d, std::int64_t n, std::int64_t c, std::int64_t h,
                   std::int64_t w, cudnnDataType_t type) {
  if (n * c * h * w > 0x7fffffff)
    throw Error("CUDA backend: a tensor of " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                std::to_string(h) + "x" + std::to_string(w) +
                " elements exceeds cuDNN's 2^31 limit; use a smaller batch");
  DDP_CUDA_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, to_int(n, "batch"),
                                            to_int(c, "channels"), to_int(h, "height"),
                                            to_int(w, "width")));
}

}  // namespace cuda

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return "";
  (void)cudaGetLastError();
  if (e == cudaSuccess || e == cudaErrorNoDevice)
    return "no CUDA-capable GPU is visible to this process" + cuda::visible_devices_note();
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    const std::string rt = cuda::cuda_version_text(runtime);
    if (driver == 0)
      return "no NVIDIA driver was found (libcuda.so could not be loaded): this machine has no "
             "usable "
             "GPU, or the driver is not installed (this build needs one for CUDA " +
             rt + ")";
    return "the NVIDIA driver supports CUDA " + cuda::cuda_version_text(driver) +
           ", older than this build's CUDA runtime " + rt + ": update the driver";
  }
  return std::string("the CUDA runtime cannot use the GPUs: cudaGetDeviceCount failed with ") +
         cuda::describe_cuda_error(e) + cuda::visible_devices_note();
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

CudaDeviceInfo cuda_device_info(int device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count)
    throw SystemError("CUDA device " + std::to_string(device) +
                      " does not exist: this process sees " + std::to_string(count) + " GPU(s)" +
                      cuda::visible_devices_note());
  cudaDeviceProp prop{};
  DDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CudaDeviceInfo info;
  info.index = device;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.total_memory = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  // The format nvidia-smi -L prints: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char uuid[64];
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  info.uuid = uuid;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) info.pci_bus_id = bus;
  (void)cudaGetLastError();
  return info;
}

std::string cuda_versions() {
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  (void)cudaGetLastError();
  std::string s = "CUDA runtime " + cuda::cuda_version_text(runtime) + " (driver " +
                  (driver > 0 ? "CUDA " + cuda::cuda_version_text(driver) : std::string("none")) +
                  ")";
  // cuDNN >= 9 and NCCL >= 2.9 encode major * 10000 + minor * 100 + patch.
  const auto cudnn = static_cast<int>(cudnnGetVersion());
  s += ", cuDNN " + cuda::version_text(cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    s += ", cuBLAS " + cuda::version_text(major, minor, patch);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    s += ", NCCL " + cuda::version_text(nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  return s;
}

namespace cuda {

void* device_alloc(int device, std::size_t bytes) {
  DeviceGuard guard(device);
  void* p = nullptr;
  DDP_CUDA_CHECK(cudaMalloc(&p, bytes));
  // cudaMemset runs on the legacy default stream, which our non-blocking streams do not wait for:
  // finish it here (allocation is rare). A failure frees the memory here: the caller (a
  // constructor that throws) owns nothing yet.
  cudaError_t e = cudaMemset(p, 0, bytes);
  if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
  if (e != cudaSuccess) {
    (void)cudaFree(p);
    DDP_CUDA_CHECK(e);
  }
  return p;
}

void device_free(int device, void* p) {
  int previous = -1;
  (void)cudaGetDevice(&previous);
  if (previous != device) (void)cudaSetDevice(device);
  (void)cudaFree(p);
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

void* pinned_alloc(int device, std::size_t bytes) {
  DeviceGuard guard(device);
  void* p = nullptr;
  DDP_CUDA_CHECK(cudaMallocHost(&p, bytes));
  std::memset(p, 0, bytes);
  return p;
}

void pinned_free(void* p) {
  (void)cudaFreeHost(p);
  (void)cudaGetLastError();
}

}  // namespace cuda

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device) {
  if (bytes == 0) return;
  ptr_ = cuda::device_alloc(device, bytes);
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cuda::device_free(device_, ptr_);
}

PinnedBuffer::PinnedBuffer(int device, std::size_t bytes) {
  if (bytes == 0) return;
  ptr_ = cuda::pinned_alloc(device, bytes);
  bytes_ = bytes;
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cuda::pinned_free(ptr_);
}

}  // namespace ddp::backend
