// The one symbol libddp_cuda.so exports: its table of functions (ddp/backend/cuda_plugin.hpp).
// Everything else in the plugin has hidden visibility, so the functions below are the plugin's own
// definitions, not ddp_core's same-named calls through this table.
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/backend/cuda_plugin.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/version_info.hpp"

namespace ddp::backend::cuda {
// cuda_util.cu: the memory behind DeviceBuffer and PinnedBuffer.
void* device_alloc(int device, std::size_t bytes);
void device_free(int device, void* p);
void* pinned_alloc(int device, std::size_t bytes);
void pinned_free(void* p);
}  // namespace ddp::backend::cuda

namespace {

using namespace ddp;

std::unique_ptr<backend::CudaBackend> make_backend(int device, const backend::CudaOptions& o) {
  return backend::make_cuda_backend(device, o);
}

std::unique_ptr<comm::NcclComm> make_nccl(MPI_Comm c, int device, void* stream,
                                          const comm::NcclCommOptions& o) {
  return comm::make_nccl_comm(c, device, stream, o);
}

backend::CudaPluginTable make_table() {
  backend::CudaPluginTable t;
  t.abi = backend::kCudaPluginAbi;
  t.size = sizeof(backend::CudaPluginTable);
  t.build = DDP_CUDA_PLUGIN_BUILD_ID(DDP_VERSION_STRING);
  t.unavailable_reason = &backend::cuda_unavailable_reason;
  t.device_count = &backend::cuda_device_count;
  t.device_info = &backend::cuda_device_info;
  t.versions = &backend::cuda_versions;
  t.make_backend = &make_backend;
  t.device_alloc = &backend::cuda::device_alloc;
  t.device_free = &backend::cuda::device_free;
  t.pinned_alloc = &backend::cuda::pinned_alloc;
  t.pinned_free = &backend::cuda::pinned_free;
  t.make_nccl_comm = &make_nccl;
  t.nccl_version = &comm::nccl_version;
  return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ddp::backend::CudaPluginTable*
ddp_cuda_plugin_table() {
  static const ddp::backend::CudaPluginTable table = make_table();
  return &table;
}
