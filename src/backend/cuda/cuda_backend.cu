// The CUDA backend object: the shared context (streams, handles, workspace, scratch), the
// element-wise work through cuDNN (ReLU, log-softmax) and our kernels, and make_cuda_backend().
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "context.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "kernels.cuh"
#include "ops.hpp"

namespace ddp::backend {
namespace cuda {

// --- Context -------------------------------------------------------------------------------------

Context::Context(int device, const CudaOptions& options) : device_(device), options_(options) {
  DDP_CUDA_CHECK(cudaSetDevice(device));
  info_ = cuda_device_info(device);
  compute_ = make_stream();
  copy_ = make_stream();
  cudnn_ = make_cudnn();
  DDP_CUDA_CHECK(cudnnSetStream(cudnn_, compute_));
  cublas_ = make_cublas();
  DDP_CUDA_CHECK(cublasSetStream(cublas_, compute_));
  DDP_CUDA_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
  DDP_CUDA_CHECK(cublasSetMathMode(
      cublas_, options_.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  flat_desc_ = make_tensor_desc();
  loss_acc_ = DeviceBuffer(device, 2 * sizeof(LossAccumulator));
  loss_host_ = PinnedBuffer(device, 2 * sizeof(LossAccumulator));
  for (auto& slot : host_slots_) slot.copied = make_event();
  if (options_.precision == Precision::fp16) half_ = Half::fp16;
  if (options_.precision == Precision::bf16) half_ = Half::bf16;
  bad_flag_ = DeviceBuffer(device, sizeof(unsigned int));
  bad_host_ = PinnedBuffer(device, sizeof(unsigned int));
}

cudnnDataType_t Context::half_cudnn() const {
  return half_ == Half::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

cudaDataType_t Context::half_cublas() const {
  return half_ == Half::bf16 ? CUDA_R_16BF : CUDA_R_16F;
}

void* Context::half_scratch(int slot, std::int64_t count) {
  DeviceBuffer& b = half_scratch_.at(static_cast<std::size_t>(slot));
  grow(b, static_cast<std::size_t>(count) * 2);
  return b.data();
}

Context::~Context() {
  // The buffers are freed by the members' destructors: let the queued work finish first.
  (void)cudaStreamSynchronize(compute_);
  (void)cudaStreamSynchronize(copy_);
  (void)cudaGetLastError();
}

cudnnMathType_t Context::conv_math() const {
  if (half_) return CUDNN_TENSOR_OP_MATH;
  return options_.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

bool Context::tensor_ops_allowed() const {
  return options_.allow_tf32 || half_.has_value();
}

void Context::sync() const {
  DDP_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void Context::grow(DeviceBuffer& b, std::size_t bytes) {
  if (b.bytes() >= bytes) return;
  const std::size_t old = b.bytes();
  sync();
  b = DeviceBuffer();
  b = DeviceBuffer(device_, std::max(bytes, old + old / 2));
}

void Context::reserve_workspace(std::size_t bytes) {
  if (workspace_.bytes() >= bytes) return;
  // The new one first: if it cannot be had, the old one stays, and so do the plans that fit it.
  DeviceBuffer fresh;
  try {
    fresh = DeviceBuffer(device_, bytes);
  } catch (const SystemError&) {
    // Perhaps the two do not fit together: free the old one (once the kernels using it are done)
    // and try again; if that fails too, take the old size back before reporting.
    const std::size_t old = workspace_.bytes();
    sync();
    workspace_ = DeviceBuffer();
    try {
      fresh = DeviceBuffer(device_, bytes);
    } catch (const SystemError&) {
      if (old > 0) workspace_ = DeviceBuffer(device_, old);
      throw;
    }
  }
  sync();  // earlier kernels may still use the old workspace, which is freed now
  workspace_ = std::move(fresh);
}

const float* Context::ones(std::int64_t n) {
  if (ones_count_ < n) {
    grow(ones_, static_cast<std::size_t>(n) * sizeof(float));
    ones_count_ = static_cast<std::int64_t>(ones_.bytes() / sizeof(float));
    launch_fill(compute_, ones_count_, 1.0f, ones_.floats());
  }
  return ones_.floats();
}

template <class T>
const T* Context::readable_in_place(const T* p) const {
  cudaPointerAttributes a{};
  DDP_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  if (a.type == cudaMemoryTypeDevice) {
    if (a.device != device_)
      throw Error("CUDA backend on device " + std::to_string(device_) +
                  " was given an array in the memory of device " + std::to_string(a.device));
    return p;
  }
  if (a.type == cudaMemoryTypeManaged) return p;
  if (a.type == cudaMemoryTypeHost && a.devicePointer)
    return static_cast<const T*>(a.devicePointer);
  return nullptr;
}

template <class T>
const T* Context::device_ints(const T* p, std::int64_t n, DeviceBuffer& staging) {
  if (n <= 0 || !p) return p;
  if (const T* d = readable_in_place(p)) return d;
  // Pageable host memory: through a pinned slot, asynchronously.
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  grow(staging, bytes);
  HostSlot& slot = host_slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % host_slots_.size();
  if (slot.used) DDP_CUDA_CHECK(cudaEventSynchronize(slot.copied));
  if (slot.buffer.bytes() < bytes)
    slot.buffer = PinnedBuffer(device_, std::max<std::size_t>(bytes, 4096));
  std::memcpy(slot.buffer.data(), p, bytes);
  DDP_CUDA_CHECK(
      cudaMemcpyAsync(staging.data(), slot.buffer.data(), bytes, cudaMemcpyHostToDevice, compute_));
  DDP_CUDA_CHECK(cudaEventRecord(slot.copied, compute_));
  slot.used = true;
  return staging.as<T>();
}

const std::int32_t* Context::device_labels(const std::int32_t* p, std::int64_t n) {
  return device_ints(p, n, labels_);
}
const std::int64_t* Context::device_sample_ids(const std::int64_t* p, std::int64_t n) {
  // Every dropout layer of a micro-batch passes the same ids: upload them once, and let the later
  // layers read the device copy (stream order makes it current for them), instead of a copy per
  // layer through the small ring of pinned slots (which would then wait for its own earlier
  // copies).
  const auto count = static_cast<std::size_t>(std::max<std::int64_t>(n, 0));
  if (!p || count == 0) return p;
  // Device-readable ids are used in place; only pageable host memory may be compared on the host
  // (a device pointer read there is a segmentation fault).
  if (const std::int64_t* d = readable_in_place(p)) {
    sample_ids_held_.clear();
    return d;
  }
  if (sample_ids_held_.size() == count &&
      std::memcmp(sample_ids_held_.data(), p, count * sizeof(std::int64_t)) == 0)
    return sample_ids_.as<std::int64_t>();
  const std::int64_t* d = device_ints(p, n, sample_ids_);
  sample_ids_held_.assign(p, p + count);
  ++sample_id_uploads_;
  return d;
}

float* Context::loss_logp(std::int64_t count) {
  grow(logp_, static_cast<std::size_t>(count) * sizeof(float));
  return logp_.floats();
}
double* Context::loss_per_sample(std::int64_t n) {
  grow(per_sample_, static_cast<std::size_t>(n) * sizeof(double));
  return per_sample_.as<double>();
}
unsigned char* Context::loss_flags(std::int64_t n) {
  grow(flags_, static_cast<std::size_t>(n));
  return flags_.as<unsigned char>();
}

DeviceQueue::EventId Context::new_event(bool timing) {
  auto& spare = spare_events_[timing ? 1 : 0];
  if (!spare.empty()) {
    const DeviceQueue::EventId e = spare.back();
    spare.pop_back();
    return e;
  }
  events_.push_back(make_event(timing));
  event_timing_.push_back(timing);
  return static_cast<DeviceQueue::EventId>(events_.size() - 1);
}
void Context::release_event(DeviceQueue::EventId e) {
  (void)event(e);  // checks the id
  auto& spare = spare_events_[event_timing_[static_cast<std::size_t>(e)] ? 1 : 0];
  if (std::find(spare.begin(), spare.end(), e) != spare.end())
    throw Error("internal: CUDA event " + std::to_string(e) + " released twice");
  spare.push_back(e);
}
cudaEvent_t Context::event(DeviceQueue::EventId e) const {
  if (e < 0 || static_cast<std::size_t>(e) >= events_.size())
    throw Error("internal: CUDA backend has no event " + std::to_string(e));
  return events_[static_cast<std::size_t>(e)];
}

// --- the backend ---------------------------------------------------------------------------------

namespace {

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
    const auto v = static_cast<int>(cudnnGetVersion());
    name_ = "cuda:" + std::to_string(ctx_->device()) + " (" + ctx_->info().name + ", cuDNN " +
            std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + ")";
  }
  ~CudaBackendImpl() override = default;

  Device device() const override { return Device::cuda; }
  std::string name() const override { return name_; }
  cudaStream_t stream_of(Stream s) const {
    return s == Stream::compute ? ctx_->stream() : ctx_->copy_stream();
  }

  std::unique_ptr<ConvOp> conv(const ConvGeom& g) override { return make_conv(ctx_, g); }
  std::unique_ptr<PoolOp> pool(const PoolGeom& g) override { return make_pool(ctx_, g); }
  std::unique_ptr<LinearOp> linear(const LinearGeom& g) override { return make_linear(ctx_, g); }
  std::unique_ptr<BatchNormOp> batch_norm(const BatchNormGeom& g) override {
    return make_batch_norm(ctx_, g);
  }

  // Our own kernels (kernels.cu), the CPU's arithmetic: cuDNN has no GELU, and its ReLU turns NaN
  // into 0 where the CPU keeps it.
  void activation_forward(Activation kind, float alpha, std::int64_t count, const float* x,
                          float* y) override {
    launch_activation_forward(ctx_->stream(), kind, alpha, count, x, y);
  }
  void activation_backward(Activation kind, float alpha, std::int64_t count, const float* x,
                           const float* y, const float* dy, float* dx) override {
    launch_activation_backward(ctx_->stream(), kind, alpha, count, x, y, dy, dx);
  }

  void dropout_forward(std::int64_t n, std::int64_t per_sample, float p, std::uint64_t seed,
                       const std::int64_t* sample_ids, const float* x, float* mask,
                       float* y) override {
    // The CPU's constants, computed the same way on the host.
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 0x1.0p24);
    if (!sample_ids && n > 0) throw Error("internal: dropout needs the batch's sample ids");
    const std::int64_t* ids = ctx_->device_sample_ids(sample_ids, n);
    launch_dropout(ctx_->stream(), n, per_sample, threshold, keep_scale, seed, ids, x, mask, y);
  }
  void mul(std::int64_t count, const float* a, const float* b, float* y) override {
    launch_mul(ctx_->stream(), count, a, b, y);
  }

  LossResult softmax_xent(std::int64_t n, std::int64_t classes, const float* logits,
                          const std::int32_t* labels, float label_smoothing, float grad_scale,
                          float* dlogits) override {
    LossAccumulator* acc = ctx_->loss_acc(1);
    DDP_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(LossAccumulator), ctx_->stream()));
    enqueue_xent(n, classes, logits, labels, label_smoothing, grad_scale, dlogits, acc);
    return read_loss(acc, 1);
  }
  void softmax_xent_accumulate(std::int64_t n, std::int64_t classes, const float* logits,
                               const std::int32_t* labels, float label_smoothing, float grad_scale,
                               float* dlogits) override {
    enqueue_xent(n, classes, logits, labels, label_smoothing, grad_scale, dlogits,
                 ctx_->loss_acc(0));
  }
  LossResult take_loss() override {
    const LossResult r = read_loss(ctx_->loss_acc(0), 0);
    DDP_CUDA_CHECK(cudaMemsetAsync(ctx_->loss_acc(0), 0, sizeof(LossAccumulator), ctx_->stream()));
    return r;
  }

  void sgd_step(std::int64_t count, const SgdHyper& h, float* w, const float* g,
                float* m) override {
    launch_sgd(ctx_->stream(), count, h, w, g, m);
  }
  void adam_step(std::int64_t count, const AdamHyper& h, float* w, const float* g, float* m,
                 float* v) override {
    // Bias corrections as cpu::adam_step computes them (double, then float).
    const double t = static_cast<double>(h.step);
    const auto bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), t));
    const auto bc2_sqrt =
        static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), t)));
    launch_adam(ctx_->stream(), count, h, bc1, bc2_sqrt, w, g, m, v);
  }

  void fill(std::int64_t count, float value, float* y) override {
    if (count <= 0) return;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    if (bits == 0)  // +0.0f: all-zero bytes
      DDP_CUDA_CHECK(
          cudaMemsetAsync(y, 0, static_cast<std::size_t>(count) * sizeof(float), ctx_->stream()));
    else
      launch_fill(ctx_->stream(), count, value, y);
  }
  void copy(std::int64_t count, const float* x, float* y) override {
    if (count <= 0 || x == y) return;
    DDP_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<std::size_t>(count) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx_->stream()));
  }
  void add(std::int64_t count, const float* x, float* y) override {
    launch_add(ctx_->stream(), count, x, y);
  }
  void lerp(std::int64_t count, const float* x, float weight, float* y) override {
    launch_lerp(ctx_->stream(), count, x, weight, y);
  }
  void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t dy,
                  std::int64_t dx, bool flip, const float* x, float* y) override {
    launch_image_view(ctx_->stream(), n, c, h, w, dy, dx, flip, x, y);
  }
  void copy_rows(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_pitch,
                 float* y, std::int64_t y_pitch) override {
    if (rows <= 0 || cols <= 0) return;
    constexpr std::size_t f = sizeof(float);
    DDP_CUDA_CHECK(cudaMemcpy2DAsync(
        y, static_cast<std::size_t>(y_pitch) * f, x, static_cast<std::size_t>(x_pitch) * f,
        static_cast<std::size_t>(cols) * f, static_cast<std::size_t>(rows),
        cudaMemcpyDeviceToDevice, ctx_->stream()));
  }
  bool unscale_check(std::int64_t count, float* g, float inv_scale) override {
    DDP_CUDA_CHECK(cudaMemsetAsync(ctx_->bad_flag(), 0, sizeof(unsigned int), ctx_->stream()));
    launch_unscale_check(ctx_->stream(), count, g, inv_scale, ctx_->bad_flag());
    DDP_CUDA_CHECK(cudaMemcpyAsync(ctx_->bad_flag_host(), ctx_->bad_flag(), sizeof(unsigned int),
                                   cudaMemcpyDeviceToHost, ctx_->stream()));
    ctx_->sync();
    return *ctx_->bad_flag_host() == 0;
  }

  const std::uint32_t* unscale_flag(std::int64_t count, float* g, float inv_scale,
                                    int slot) override {
    if (slot < 0 || slot >= kOverflowSlots)
      throw Error("internal: overflow flag slot " + std::to_string(slot));
    auto* flag = overflow_flags_.as<std::uint32_t>() + slot;
    auto* host = overflow_host_.as<std::uint32_t>() + slot;
    DDP_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(std::uint32_t), ctx_->stream()));
    launch_unscale_check(ctx_->stream(), count, g, inv_scale, flag);
    DDP_CUDA_CHECK(
        cudaMemcpyAsync(host, flag, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, ctx_->stream()));
    DDP_CUDA_CHECK(cudaEventRecord(overflow_read_[static_cast<std::size_t>(slot)], ctx_->stream()));
    return flag;
  }
  bool overflow_seen(int slot) override {
    if (slot < 0 || slot >= kOverflowSlots)
      throw Error("internal: overflow flag slot " + std::to_string(slot));
    DDP_CUDA_CHECK(cudaEventSynchronize(overflow_read_[static_cast<std::size_t>(slot)]));
    return overflow_host_.as<std::uint32_t>()[slot] != 0;
  }

  int device_index() const override { return ctx_->device(); }
  const CudaDeviceInfo& device_info() const override { return ctx_->info(); }
  void* compute_stream() const override { return static_cast<void*>(ctx_->stream()); }
  void synchronize() override {
    ctx_->sync();
    DDP_CUDA_CHECK(cudaStreamSynchronize(ctx_->copy_stream()));
  }
  void synchronize_compute() override { ctx_->sync(); }
  std::int64_t sample_id_uploads() const override { return ctx_->sample_id_uploads(); }
  void to_device(const void* host, void* device, std::size_t bytes) override {
    if (bytes == 0) return;
    DDP_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, ctx_->stream()));
    ctx_->sync();
  }
  void enqueue_host_function(void (*fn)(void*), void* arg) override {
    DDP_CUDA_CHECK(cudaLaunchHostFunc(ctx_->stream(), fn, arg));
  }

  void to_host(const void* device, void* host, std::size_t bytes) override {
    if (bytes == 0) return;
    DDP_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, ctx_->stream()));
    ctx_->sync();
  }

  // --- DeviceQueue ---
  std::shared_ptr<void> pinned_bytes(std::size_t bytes) override {
    auto b = std::make_shared<PinnedBuffer>(ctx_->device(), bytes);
    return std::shared_ptr<void>(b, b->data());
  }
  std::shared_ptr<void> device_bytes(std::size_t bytes) override {
    auto b = std::make_shared<DeviceBuffer>(ctx_->device(), bytes);
    return std::shared_ptr<void>(b, b->data());
  }
  void copy_to_device_async(const void* pinned, void* device, std::size_t bytes) override {
    if (bytes == 0) return;
    DDP_CUDA_CHECK(
        cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, ctx_->copy_stream()));
  }
  EventId new_event(bool timing) override { return ctx_->new_event(timing); }
  void release_event(EventId e) override { ctx_->release_event(e); }
  void record(EventId e, Stream s) override {
    DDP_CUDA_CHECK(cudaEventRecord(ctx_->event(e), stream_of(s)));
  }
  void stream_waits(Stream s, EventId e) override {
    DDP_CUDA_CHECK(cudaStreamWaitEvent(stream_of(s), ctx_->event(e), 0));
  }
  void host_waits(EventId e) override { DDP_CUDA_CHECK(cudaEventSynchronize(ctx_->event(e))); }
  bool finished(EventId e) override {
    const cudaError_t q = cudaEventQuery(ctx_->event(e));
    if (q == cudaErrorNotReady) return false;
    DDP_CUDA_CHECK(q);
    return true;
  }
  double elapsed_s(EventId from, EventId to) override {
    float ms = 0.0f;
    DDP_CUDA_CHECK(cudaEventElapsedTime(&ms, ctx_->event(from), ctx_->event(to)));
    return static_cast<double>(ms) * 1e-3;
  }
  std::size_t workspace_bytes() const override { return ctx_->workspace_size(); }
  std::size_t free_memory_bytes() const override {
    cuda::DeviceGuard guard(ctx_->device());
    std::size_t free = 0, total = 0;
    DDP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }

  Tensor alloc(Shape shape) override {
    const std::int64_t n = shape.numel();
    auto buf = std::make_shared<DeviceBuffer>(
        ctx_->device(), static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(float));
    // The tensor shares ownership of the buffer (aliasing constructor): cudaFree when the last
    // view goes away.
    std::shared_ptr<float[]> storage(buf, buf->floats());
    return Tensor::adopt(std::move(storage), std::move(shape), Device::cuda);
  }
  void upload(const float* host, float* dst, std::size_t count) override {
    to_device(host, dst, count * sizeof(float));
  }
  void download(const float* src, float* host, std::size_t count) override {
    to_host(src, host, count * sizeof(float));
  }

 private:
  void enqueue_xent(std::int64_t n, std::int64_t classes, const float* logits,
                    const std::int32_t* labels, float label_smoothing, float grad_scale,
                    float* dlogits, LossAccumulator* acc) {
    if (n <= 0) return;
    float* logp = ctx_->loss_logp(n * classes);
    double* per_sample = ctx_->loss_per_sample(n);
    unsigned char* flags = ctx_->loss_flags(n);
    const std::int32_t* dev_labels = ctx_->device_labels(labels, n);
    // log p = log-softmax over each sample's logits (cuDNN's INSTANCE mode on [n, classes, 1, 1]).
    set_tensor_4d(ctx_->flat_desc(), n, classes, 1, 1);
    DDP_CUDA_CHECK(cudnnSoftmaxForward(ctx_->cudnn(), CUDNN_SOFTMAX_LOG,
                                       CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, ctx_->flat_desc(),
                                       logits, &kZero, ctx_->flat_desc(), logp));
    launch_xent(ctx_->stream(), n, classes, logits, logp, dev_labels, label_smoothing, grad_scale,
                dlogits, per_sample, flags, acc);
  }

  LossResult read_loss(const LossAccumulator* acc, int slot) {
    LossAccumulator* host = ctx_->loss_host() + slot;
    DDP_CUDA_CHECK(cudaMemcpyAsync(host, acc, sizeof(LossAccumulator), cudaMemcpyDeviceToHost,
                                   ctx_->stream()));
    ctx_->sync();
    if (host->bad_labels > 0)
      throw DataError("softmax cross-entropy: " + std::to_string(host->bad_labels) +
                      " label(s) outside [0, number of classes): the dataset's labels do not match "
                      "the model's output size");
    LossResult r;
    r.loss_sum = host->loss_sum;
    r.correct = static_cast<std::int64_t>(host->correct);
    return r;
  }

  std::shared_ptr<Context> ctx_;
  std::string name_;
  // unscale_flag's flags on the device, their pinned copies, and the event after each copy.
  DeviceBuffer overflow_flags_{ctx_->device(), kOverflowSlots * sizeof(std::uint32_t)};
  PinnedBuffer overflow_host_{ctx_->device(), kOverflowSlots * sizeof(std::uint32_t)};
  std::array<cuda::Event, kOverflowSlots> overflow_read_{cuda::make_event(), cuda::make_event(),
                                                         cuda::make_event(), cuda::make_event()};
};

}  // namespace
}  // namespace cuda

std::unique_ptr<CudaBackend> make_cuda_backend(int device, const CudaOptions& options) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw SystemError("the CUDA backend cannot run here: " + why);
  const CudaDeviceInfo info = cuda_device_info(device);  // throws for a device that does not exist
  DDP_CUDA_CHECK(cudaSetDevice(device));
  // A GPU older (or newer, without PTX) than the architectures this build has code for: say so now
  // rather than at the first kernel launch.
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, cuda::probe_kernel());
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw SystemError("CUDA device " + std::to_string(device) + " (" + info.name +
                      ", compute capability " + std::to_string(info.cc_major) + "." +
                      std::to_string(info.cc_minor) +
                      ") cannot run this build's kernels: " + cuda::describe_cuda_error(e));
  }
  // bf16 convolutions and GEMMs need Ampere's tensor cores (cuDNN has no bf16 kernels before).
  if (options.precision == Precision::bf16 && info.cc_major < 8)
    throw ConfigError("runtime.precision = bf16 needs a GPU of compute capability 8.0 or newer (" +
                      info.name + " is " + std::to_string(info.cc_major) + "." +
                      std::to_string(info.cc_minor) + "): use fp16 or fp32");
  return std::make_unique<cuda::CudaBackendImpl>(std::make_shared<cuda::Context>(device, options));
}

}  // namespace ddp::backend
