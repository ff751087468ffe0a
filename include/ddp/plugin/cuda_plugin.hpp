#pragma once
// The CUDA backend and the NCCL communicator live in a plugin, libddp_cuda.so, so that one
// ddp_train binary runs on nodes without the CUDA libraries: ddp_train links none of libcudart,
// libcublas, libcudnn and libnccl; the plugin does, and is loaded with dlopen the first time a
// function of ddp/backend/cuda_backend.hpp or ddp/comm/nccl_comm.hpp is called (runtime.device
// cuda or auto, --version, doctor). When it does not load, those functions report why (dlerror's
// text) instead of the process dying before main.
//
// This room (src/plugin/) is the loader and both sides of the boundary: ddp_core's definitions of
// those functions, which call through the plugin's table (cuda_via_plugin.cpp,
// nccl_via_plugin.cpp), and the plugin's one exported symbol that returns the table
// (plugin_entry.cu). It sits above backend and comm, which know nothing of it.
//
// Where it is looked for: the file named by the environment variable DDP_CUDA_PLUGIN, else next
// to the executable (the build tree), else in ../lib and ../<CMAKE_INSTALL_LIBDIR> beside the
// executable's directory (an installation: P/bin/ddp_train, P/lib/libddp_cuda.so).
//
// The boundary. The plugin exports one C function (kCudaPluginEntrySymbol) returning a table of
// function pointers. C++ types (std::string, std::unique_ptr, the Backend and Communicator
// interfaces, exceptions) cross it, so both sides must be built from the same interface: the
// table's interface_hash is a SHA-256 of every header of ours that the plugin's sources reach
// (cmake/PluginInterface.cmake computes it at build time and compiles it into both sides), and the
// loader refuses a plugin whose hash differs, before anything else of it is used. The plugin
// resolves what it uses of ddp_core (the Backend base class, error types, the stall report) from
// the executable, which exports its symbols for that (ENABLE_EXPORTS).
#include <mpi.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

namespace ddp::comm {
class NcclComm;
struct NcclCommOptions;
}  // namespace ddp::comm

namespace ddp::backend {
class CudaBackend;
struct CudaDeviceInfo;
struct CudaOptions;
}  // namespace ddp::backend

namespace ddp::plugin {

inline constexpr const char* kCudaPluginEntrySymbol = "ddp_cuda_plugin_table";
inline constexpr const char* kCudaPluginFile = "libddp_cuda.so";

struct CudaPluginTable {
  // The first three fields stay first in every version: a loader reads them from any plugin.
  const char* interface_hash = "";  // cuda_plugin_interface_hash() as the plugin was built
  std::size_t size = 0;             // sizeof(CudaPluginTable) as the plugin was built
  const char* build = "";           // DDP_CUDA_PLUGIN_BUILD_ID as the plugin was built
  std::string (*unavailable_reason)() = nullptr;
  int (*device_count)() = nullptr;
  backend::CudaDeviceInfo (*device_info)(int device) = nullptr;
  std::string (*versions)() = nullptr;
  std::unique_ptr<backend::CudaBackend> (*make_backend)(
      int device, const backend::CudaOptions& options) = nullptr;
  // DeviceBuffer / PinnedBuffer: zero-filled memory, freed by the matching function.
  void* (*device_alloc)(int device, std::size_t bytes) = nullptr;
  void (*device_free)(int device, void* p) = nullptr;
  void* (*pinned_alloc)(int device, std::size_t bytes) = nullptr;
  void (*pinned_free)(void* p) = nullptr;
  std::unique_ptr<comm::NcclComm> (*make_nccl_comm)(MPI_Comm comm, int device, void* compute_stream,
                                                    const comm::NcclCommOptions& options) = nullptr;
  std::string (*nccl_version)() = nullptr;
};

// The plugin's function: extern "C" const CudaPluginTable* ddp_cuda_plugin_table();
using CudaPluginEntry = const CudaPluginTable* (*)();

// What both sides must agree on beyond the interface: the project version and the compiler.
#define DDP_CUDA_PLUGIN_BUILD_ID(version) version " (" __VERSION__ ")"

// The interface hash this binary was built with (64 hex digits).
const char* cuda_plugin_interface_hash();

struct CudaPluginStatus {
  bool loaded = false;
  std::string path;   // the file loaded or tried last ("" when none was found)
  std::string error;  // why it did not load ("" when it did)
};

// Loads the plugin on the first call (thread-safe; never throws); later calls return the same.
const CudaPluginStatus& cuda_plugin_status();
// The plugin's table, or nullptr when it did not load.
const CudaPluginTable* cuda_plugin();

// Why no NVIDIA driver can be used here ("" when libcuda.so.1, the driver library the CUDA runtime
// loads, does load; checked once). Without one no GPU can be used, and loading the plugin would
// only cost start-up time (libcublasLt alone: about 1 s and 0.5 CPU-seconds): runtime.device =
// auto then decides on the CPU without loading it (backend/cuda_backend.hpp's queries).
const std::string& nvidia_driver_absence();
// Whether cuda_plugin_status() has been called (the plugin loaded, or was tried and refused).
bool cuda_plugin_tried();

// Loads and checks the file `path` as the first call of cuda_plugin_status does, but on every call
// (for tests and tools): its status, and its table in *table when it loaded (the library then stays
// open, as the cached one does).
CudaPluginStatus load_cuda_plugin(const std::filesystem::path& path, const CudaPluginTable** table);

}  // namespace ddp::plugin
