// The functions of ddp/comm/nccl_comm.hpp in ddp_core: calls through the CUDA plugin's table
// (ddp/plugin/cuda_plugin.hpp), which holds the NCCL communicator.
#include <string>

#include "ddp/comm/nccl_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/plugin/cuda_plugin.hpp"

namespace ddp::comm {

std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm comm, int device, void* compute_stream,
                                         NcclCommOptions options) {
  const plugin::CudaPluginTable* t = plugin::cuda_plugin();
  if (!t) throw SystemError("NCCL is not available: " + plugin::cuda_plugin_status().error);
  return t->make_nccl_comm(comm, device, compute_stream, options);
}

std::string nccl_version() {
  const plugin::CudaPluginTable* t = plugin::cuda_plugin();
  return t ? t->nccl_version() : std::string();
}

}  // namespace ddp::comm
