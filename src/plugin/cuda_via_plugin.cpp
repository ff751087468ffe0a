// The functions of ddp/backend/cuda_backend.hpp in ddp_core: calls through the CUDA plugin's
// table (ddp/plugin/cuda_plugin.hpp), or, when it did not load, the reason why. The plugin has
// its own definitions of the same functions, bound inside it (it is built with hidden
// visibility), which its table points to.
#include <string>

#include "ddp/backend/cuda_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/plugin/cuda_plugin.hpp"

namespace ddp::backend {
namespace {

using plugin::cuda_plugin;
using plugin::cuda_plugin_status;
using plugin::CudaPluginTable;

// The driver's absence, when it decides the answer without the plugin: before anything has loaded
// the plugin (--version and doctor do, to report it), on a machine without an NVIDIA driver.
const std::string* no_driver() {
  if (plugin::cuda_plugin_tried()) return nullptr;
  const std::string& why = plugin::nvidia_driver_absence();
  return why.empty() ? nullptr : &why;
}

const CudaPluginTable& plugin_or_throw() {
  if (const std::string* why = no_driver())
    throw SystemError("the CUDA backend cannot run here: " + *why);
  if (const CudaPluginTable* t = cuda_plugin()) return *t;
  throw SystemError("the CUDA backend is not available: " + cuda_plugin_status().error);
}

}  // namespace

bool cuda_built() {
  return cuda_plugin() != nullptr;
}

std::string cuda_unavailable_reason() {
  if (const std::string* why = no_driver()) return *why;
  const CudaPluginTable* t = cuda_plugin();
  return t ? t->unavailable_reason() : cuda_plugin_status().error;
}

int cuda_device_count() {
  if (no_driver()) return 0;
  const CudaPluginTable* t = cuda_plugin();
  return t ? t->device_count() : 0;
}

CudaDeviceInfo cuda_device_info(int device) {
  return plugin_or_throw().device_info(device);
}

std::string cuda_versions() {
  const CudaPluginTable* t = cuda_plugin();
  return t ? t->versions() : std::string();
}

std::unique_ptr<CudaBackend> make_cuda_backend(int device, const CudaOptions& options) {
  return plugin_or_throw().make_backend(device, options);
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device) {
  if (bytes == 0) return;
  ptr_ = plugin_or_throw().device_alloc(device, bytes);
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cuda_plugin()->device_free(device_, ptr_);
}

PinnedBuffer::PinnedBuffer(int device, std::size_t bytes) {
  if (bytes == 0) return;
  ptr_ = plugin_or_throw().pinned_alloc(device, bytes);
  bytes_ = bytes;
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cuda_plugin()->pinned_free(ptr_);
}

}  // namespace ddp::backend
