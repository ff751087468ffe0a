// A stand-in for a libddp_cuda.so built from another plugin interface (an older or newer tree):
// it exports the entry symbol, and its table carries an interface hash that is not this tree's,
// with this build's version and compiler. The loader must refuse it by its hash
// (tests/unit/cuda_plugin_loader_test.cpp, tests/integration/test_cuda_plugin_foreign.sh). Needs
// no CUDA: the loader reads nothing of a refused table past its first three fields.
#include "ddp/plugin/cuda_plugin.hpp"
#include "ddp/version_info.hpp"

extern "C" __attribute__((visibility("default"))) const ddp::plugin::CudaPluginTable*
ddp_cuda_plugin_table() {
  static const ddp::plugin::CudaPluginTable table = [] {
    ddp::plugin::CudaPluginTable t;
    t.interface_hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    t.size = sizeof(ddp::plugin::CudaPluginTable);
    t.build = DDP_CUDA_PLUGIN_BUILD_ID(DDP_VERSION_STRING);
    return t;
  }();
  return &table;
}
