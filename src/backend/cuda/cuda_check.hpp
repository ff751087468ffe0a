#pragma once
// Error checks of the CUDA backend: every CUDA runtime, cuDNN and cuBLAS call goes through one of
// these, and a failure becomes a ddp::SystemError naming the call, the status and where it was:
//   CUDA error: cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation (out of memory)
//   [conv.cu:42]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "ddp/error.hpp"

namespace ddp::backend::cuda {

const char* cublas_status_name(cublasStatus_t s);

// The message of a failed call; adds a hint for the errors a user can act on (out of memory, a
// driver too old, a GPU this build has no kernels for).
std::string describe_cuda_error(cudaError_t e);

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda(e, call, file, line);
}
inline void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) throw_cudnn(s, call, file, line);
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cublas(s, call, file, line);
}

// After a kernel launch: configuration errors surface here, faults at the next synchronisation.
#define DDP_CHECK_LAUNCH(what) \
  ::ddp::backend::cuda::check(cudaGetLastError(), "launch of " what, __FILE__, __LINE__)

}  // namespace ddp::backend::cuda

#define DDP_CUDA_CHECK(call) ::ddp::backend::cuda::check((call), #call, __FILE__, __LINE__)
