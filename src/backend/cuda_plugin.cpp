// Finding and loading libddp_cuda.so (see ddp/backend/cuda_plugin.hpp).
#include "ddp/backend/cuda_plugin.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "ddp/version_info.hpp"

#ifndef DDP_INSTALL_LIBDIR
#define DDP_INSTALL_LIBDIR "lib"
#endif

namespace ddp::backend {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> candidates() {
  if (const char* env = std::getenv("DDP_CUDA_PLUGIN"); env && *env) return {fs::path(env)};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path dir = exe.parent_path();
  std::vector<fs::path> out{dir / kCudaPluginFile, dir.parent_path() / "lib" / kCudaPluginFile};
  const fs::path libdir = dir.parent_path() / DDP_INSTALL_LIBDIR / kCudaPluginFile;
  if (libdir != out.back()) out.push_back(libdir);
  return out;
}

CudaPluginStatus load(const CudaPluginTable*& table) {
  CudaPluginStatus st;
  const std::vector<fs::path> places = candidates();
  fs::path found;
  for (const fs::path& p : places) {
    std::error_code ec;
    if (fs::exists(p, ec)) {
      found = fs::weakly_canonical(p, ec);
      if (ec) found = p;
      break;
    }
  }
  if (found.empty()) {
    std::string where;
    for (const fs::path& p : places) where += (where.empty() ? "" : ", ") + p.string();
    st.error = std::string(kCudaPluginFile) + " not found (looked for " + where +
               "): this ddp_train was built without the CUDA backend (DDP_CUDA=OFF, or the CUDA "
               "toolkit, cuDNN or NCCL was missing at configure time), or the plugin was not "
               "installed beside it (DDP_CUDA_PLUGIN names the file)";
    return st;
  }
  st.path = found.string();
  // RTLD_NOW: a missing library or symbol is reported here, not as a crash at the first call.
  // RTLD_LOCAL: the CUDA libraries' symbols stay out of the executable's namespace.
  void* h = dlopen(st.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    const std::string why = e ? e : "dlopen failed";
    st.error = std::string(kCudaPluginFile) + " did not load: " + why;
    if (why.find("cannot open shared object file") != std::string::npos)
      st.error +=
          " (the CUDA runtime, cuBLAS, cuDNN or NCCL libraries are not installed on this "
          "node or not on its library path: `module load` them, or set LD_LIBRARY_PATH)";
    return st;
  }
  dlerror();
  auto entry = reinterpret_cast<CudaPluginEntry>(dlsym(h, kCudaPluginEntrySymbol));
  const CudaPluginTable* t = entry ? entry() : nullptr;
  const std::string binary_build = DDP_CUDA_PLUGIN_BUILD_ID(DDP_VERSION_STRING);
  if (!t) {
    st.error =
        st.path + " is not a ddp_train CUDA plugin (it has no " + kCudaPluginEntrySymbol + ")";
  } else if (t->abi != kCudaPluginAbi || t->size != sizeof(CudaPluginTable) ||
             binary_build != t->build) {
    st.error = st.path + " belongs to another build of ddp_train (plugin: ABI " +
               std::to_string(t->abi) + ", " + t->build + "; this binary: ABI " +
               std::to_string(kCudaPluginAbi) + ", " + binary_build +
               "): install the plugin built with this binary";
  }
  if (!st.error.empty()) {
    dlclose(h);
    return st;
  }
  // Never closed: objects it made (backends, communicators) may live until exit.
  table = t;
  st.loaded = true;
  return st;
}

struct Loaded {
  const CudaPluginTable* table = nullptr;
  CudaPluginStatus status;
};

const Loaded& loaded() {
  static std::once_flag once;
  static Loaded l;
  std::call_once(once, [] { l.status = load(l.table); });
  return l;
}

}  // namespace

const CudaPluginStatus& cuda_plugin_status() {
  return loaded().status;
}

const CudaPluginTable* cuda_plugin() {
  return loaded().table;
}

}  // namespace ddp::backend
