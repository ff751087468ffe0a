#include "ddp/app/build_info.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>

#include "ddp/backend/cuda_backend.hpp"
#include "ddp/plugin/cuda_plugin.hpp"
#include "ddp/version_info.hpp"

namespace ddp::app {

std::string build_info() {
  std::ostringstream os;
  os << "ddp_train " << DDP_VERSION_STRING << " (" << DDP_BUILD_TYPE << ")\n";
  os << "backends: cpu (oneDNN)";
  // The CUDA backend is the plugin libddp_cuda.so: say whether it loaded, from where, or why not.
  const plugin::CudaPluginStatus& cuda = plugin::cuda_plugin_status();
  if (cuda.loaded) {
    os << ", cuda (cuDNN, cuBLAS, NCCL; plugin " << cuda.path << ")\n"
       << backend::cuda_versions() << "\n";
    if (const std::string why = backend::cuda_unavailable_reason(); !why.empty())
      os << "cuda: no usable GPU: " << why << "\n";
  } else {
    os << "; cuda plugin not loaded: " << cuda.error << "\n";
  }
  const dnnl_version_t* v = dnnl_version();
  os << "oneDNN " << v->major << "." << v->minor << "." << v->patch << "\n";
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_text(mpi, static_cast<std::size_t>(len));
  if (auto nl = mpi_text.find_first_of(",\n"); nl != std::string::npos) mpi_text.resize(nl);
  os << "MPI: " << mpi_text << "\n";
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  os << "HDF5 " << maj << "." << min << "." << rel;
  return os.str();
}

}  // namespace ddp::app
