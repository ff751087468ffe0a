// The CUDA backend's functions in a build without it (DDP_CUDA=OFF, or nvcc/cuDNN/NCCL/cuBLAS not
// found at configure time). This file is compiled into ddp_core by its source glob in every build;
// with the backend built in (DDP_HAVE_CUDA=1) it is empty and src/backend/cuda/*.cu and
// src/comm/nccl_comm.cu provide the real functions. Callers need no #ifdef: they ask
// cuda_unavailable_reason() and get a reason they can print.
#if !defined(DDP_HAVE_CUDA) || !DDP_HAVE_CUDA

#include <string>

#include "ddp/backend/cuda_backend.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/error.hpp"

namespace ddp {
namespace {

const char* const kNotBuilt =
    "this ddp_train was built without the CUDA backend (configured with DDP_CUDA=OFF, or nvcc, "
    "cuDNN, NCCL or cuBLAS was not found; the CMake output names what was missing)";

[[noreturn]] void not_built() {
  throw SystemError(kNotBuilt);
}

}  // namespace

namespace backend {

bool cuda_built() {
  return false;
}
std::string cuda_unavailable_reason() {
  return kNotBuilt;
}
int cuda_device_count() {
  return 0;
}
CudaDeviceInfo cuda_device_info(int) {
  not_built();
}
std::string cuda_versions() {
  return "";
}
std::unique_ptr<CudaBackend> make_cuda_backend(int, const CudaOptions&) {
  not_built();
}

DeviceBuffer::DeviceBuffer(int, std::size_t) {
  not_built();
}
DeviceBuffer::~DeviceBuffer() = default;
PinnedBuffer::PinnedBuffer(int, std::size_t) {
  not_built();
}
PinnedBuffer::~PinnedBuffer() = default;

}  // namespace backend

namespace comm {

struct NcclComm::Impl {};

NcclComm::NcclComm(MPI_Comm, int, void*, NcclCommOptions) {
  not_built();
}
NcclComm::~NcclComm() = default;
int NcclComm::rank() const {
  not_built();
}
int NcclComm::size() const {
  not_built();
}
void NcclComm::allreduce_sum(std::span<float>) {
  not_built();
}
void NcclComm::allreduce_sum(std::span<double>) {
  not_built();
}
void NcclComm::allreduce_sum(std::span<std::int64_t>) {
  not_built();
}
void NcclComm::broadcast(std::span<std::byte>, int) {
  not_built();
}
void NcclComm::barrier() {
  not_built();
}
void NcclComm::allgather(std::span<const std::byte>, std::span<std::byte>) {
  not_built();
}
Request NcclComm::iallreduce_sum(std::span<float>) {
  not_built();
}
void NcclComm::wait(Request&) {
  not_built();
}
bool NcclComm::test(Request&) {
  not_built();
}
void NcclComm::set_timeout(double) {
  not_built();
}
double NcclComm::timeout() const {
  not_built();
}
void NcclComm::check_health() {
  not_built();
}
bool NcclComm::aborted() const {
  not_built();
}
std::int64_t NcclComm::collectives_started() const {
  not_built();
}
std::size_t NcclComm::pending_requests() const {
  not_built();
}
int NcclComm::device() const {
  not_built();
}
void* NcclComm::comm_stream() const {
  not_built();
}

std::string nccl_version() {
  return "";
}

}  // namespace comm
}  // namespace ddp

#endif  // !DDP_HAVE_CUDA
