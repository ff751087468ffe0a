#pragma once
// The compute backend: the kernels that layers, the loss and the optimizers run, and the memory
// they run on. One interface, a CPU implementation on oneDNN and a CUDA one on cuDNN/cuBLAS, side
// by side (Caffe style). Kernels take raw pointers in the backend's memory space plus the batch
// size of the call; ops that depend on geometry are objects created once per layer (they cache
// their primitives per batch size).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ddp/tensor.hpp"

namespace ddp::backend {

// Convolution of an NCHW input with weights [k, c / groups, r, s] (PyTorch's layout): input and
// output channels split into `groups` equal parts, part g of the output seeing only part g of the
// input (depthwise: groups = c). Dilation counts as PyTorch does (1 = dense kernel).
// Activation layouts. 0: plain NCHW, PyTorch's. B > 0: oneDNN's blocked nChw<B>c (channel blocks of
// B, the innermost B channels of a pixel side by side; C a multiple of B), the layout its CPU
// convolutions compute in, so that a chain conv -> batch norm -> ReLU -> add -> conv needs no
// conversion between layers (Backend::activation_block; nn/layout_plan.hpp decides where).
struct ConvGeom {
  std::int64_t c = 0, h = 0, w = 0;  // input
  std::int64_t k = 0, r = 0, s = 0;  // output channels, kernel height/width
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dil_h = 1, dil_w = 1, groups = 1;
  std::int64_t oh = 0, ow = 0;  // output height/width
  bool bias = true;
  int src_block = 0, dst_block = 0;  // the input's (and its gradient's) and the output's layouts
};

// Element-wise activations. relu, relu6 and leaky_relu (alpha = slope >= 0) have backward passes
// that read only the output, so they may run in place; gelu (the exact erf form, PyTorch's
// default), silu (x * sigmoid(x)) and hardswish (x * relu6(x + 3) / 6) need the input.
enum class Activation { relu, relu6, leaky_relu, gelu, silu, hardswish };
constexpr bool backward_uses_output(Activation a) {
  return a == Activation::relu || a == Activation::relu6 || a == Activation::leaky_relu;
}

class ConvOp {
 public:
  virtual ~ConvOp() = default;
  virtual void forward(std::int64_t n, const float* x, const float* w, const float* b,
                       float* y) = 0;
  // dx may be null (first layer: no input gradient needed). dw/db are overwritten.
  virtual void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                        float* dw, float* db) = 0;
};

enum class PoolKind { max, avg };

struct PoolGeom {
  PoolKind kind = PoolKind::max;
  std::int64_t c = 0, h = 0, w = 0;
  std::int64_t kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
  std::int64_t oh = 0, ow = 0;
  int block = 0;  // the layout of input and output (and their gradients)
};

class PoolOp {
 public:
  virtual ~PoolOp() = default;
  // training = true keeps what backward needs (max-pool argmax workspace).
  virtual void forward(std::int64_t n, const float* x, float* y, bool training) = 0;
  virtual void backward(std::int64_t n, const float* dy, float* dx) = 0;
};

// y = x W^T + b with W of shape [out, in] (PyTorch's nn.Linear layout).
struct LinearGeom {
  std::int64_t in = 0, out = 0;
  bool bias = true;
};

class LinearOp {
 public:
  virtual ~LinearOp() = default;
  virtual void forward(std::int64_t n, const float* x, const float* w, const float* b,
                       float* y) = 0;
  virtual void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                        float* dw, float* db) = 0;
};

// Spatial batch normalisation over NCHW (h = w = 1 for features).
struct BatchNormGeom {
  std::int64_t c = 0, h = 1, w = 1;
  float eps = 1e-5f;
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch statistic
  int block = 0;          // the layout of x, y and their gradients
  // A ReLU or ReLU6 applied to the output (Backend::batch_norm_fuses): y = act(bn(x)), and
  // backward's dy is the gradient of act's output, which the op masks where act's is zero. Saves
  // the activation's own passes over memory (nn/activation_fusion.hpp).
  std::optional<Activation> activation;
};

class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  // training: normalise with batch statistics and update running mean/var (unbiased variance, as
  // PyTorch does); otherwise normalise with the running statistics.
  virtual void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
                       float* running_mean, float* running_var, float* y, bool training) = 0;
  virtual void backward(std::int64_t n, const float* x, const float* dy, const float* gamma,
                        float* dx, float* dgamma, float* dbeta) = 0;

  // Sync batch norm: statistics over the samples of several ranks (PyTorch's SyncBatchNorm). Each
  // pass is split in two around a sum over the ranks of the op's per-channel sums, which live in
  // a buffer of doubles that the op owns, in the backend's memory:
  //   forward_sums:   [sum x (c) | sum x^2 (c) | n*h*w] of this rank's n samples;
  //   forward_apply:  mean and biased variance of the summed samples normalise x; the running
  //                   statistics take the unbiased variance (nothing changes when no rank had a
  //                   sample);
  //   backward_sums:  [sum dy (c) | sum dy*xhat (c)] of this rank; dbeta and dgamma get them (the
  //                   local parameter gradients, which the gradient all-reduce sums);
  //   backward_apply: dx from the summed pair and the summed sample count (dx may be null).
  // n may be 0 (x, y, dy, dx null then): a rank without samples still takes part.
  virtual std::span<double> forward_sums(std::int64_t n, const float* x) = 0;
  virtual void forward_apply(std::int64_t n, const float* x, const float* gamma, const float* beta,
                             float* running_mean, float* running_var, float* y) = 0;
  virtual std::span<double> backward_sums(std::int64_t n, const float* x, const float* dy,
                                          float* dgamma, float* dbeta) = 0;
  virtual void backward_apply(std::int64_t n, const float* x, const float* dy, const float* gamma,
                              float* dx) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // The blocked activation layout this backend's convolutions, pooling and batch norm take (see
  // ConvGeom), or 0 when it has none (plain NCHW only: the GPU).
  virtual int activation_block() const { return 0; }
  virtual std::unique_ptr<ConvOp> conv(const ConvGeom& g) = 0;
  virtual std::unique_ptr<PoolOp> pool(const PoolGeom& g) = 0;
  virtual std::unique_ptr<LinearOp> linear(const LinearGeom& g) = 0;
  virtual std::unique_ptr<BatchNormOp> batch_norm(const BatchNormGeom& g) = 0;
  // Whether batch_norm takes BatchNormGeom::activation = kind.
  virtual bool batch_norm_fuses(Activation /*kind*/) const { return false; }

  // Element-wise kernels over `count` floats.
  // y = f(x); alpha is leaky_relu's slope (ignored by the others). y may be x.
  virtual void activation_forward(Activation kind, float alpha, std::int64_t count, const float* x,
                                  float* y) = 0;
  // dx = f'(x) * dy. The output-based kinds (backward_uses_output) read only y, and x may be null;
  // the others read only x, and y may be null. dx may be dy.
  virtual void activation_backward(Activation kind, float alpha, std::int64_t count, const float* x,
                                   const float* y, const float* dy, float* dx) = 0;
  // Shorthands for relu.
  void relu_forward(std::int64_t count, const float* x, float* y) {
    activation_forward(Activation::relu, 0.0f, count, x, y);
  }
  // dx = dy where y > 0 else 0 (uses the output, so it works in place).
  void relu_backward(std::int64_t count, const float* y, const float* dy, float* dx) {
    activation_backward(Activation::relu, 0.0f, count, nullptr, y, dy, dx);
  }
  // Inverted dropout: keep with probability 1-p, scale kept values by 1/(1-p). The mask of element
  // j of sample i is a pure function of (seed, sample_ids[i], j) and is stored in `mask` (count
  // floats).
  virtual void dropout_forward(std::int64_t n, std::int64_t per_sample, float p, std::uint64_t seed,
                               const std::int64_t* sample_ids, const float* x, float* mask,
                               float* y) = 0;
  virtual void mul(std::int64_t count, const float* a, const float* b, float* y) = 0;

  // Softmax cross-entropy over logits [n, classes] with optional label smoothing. Writes
  // dlogits = d(sum of losses)/dlogits * grad_scale, returns the summed loss (double) and the
  // number of correct argmax predictions.
  struct LossResult {
    double loss_sum = 0.0;
    std::int64_t correct = 0;
  };
  virtual LossResult softmax_xent(std::int64_t n, std::int64_t classes, const float* logits,
                                  const std::int32_t* labels, float label_smoothing,
                                  float grad_scale, float* dlogits) = 0;

  // Fused optimizer updates over flat buffers (PyTorch's update rules, see optim/).
  struct SgdHyper {
    float lr = 0.01f, momentum = 0.0f, weight_decay = 0.0f;
    bool nesterov = false;
    // A flag from unscale_flag (backend memory): when it is set (read where the update runs, on
    // the device for a GPU) the update does nothing. nullptr: always update.
    const std::uint32_t* skip_if = nullptr;
  };
  // g_eff = g + wd*w; m = momentum*m + g_eff; w -= lr * (nesterov ? g_eff + momentum*m : m)
  // (plain w -= lr*g_eff when momentum is 0; m unused then).
  virtual void sgd_step(std::int64_t count, const SgdHyper& h, float* w, const float* g,
                        float* m) = 0;
  struct AdamHyper {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
    bool decoupled = false;                  // AdamW
    std::int64_t step = 1;                   // 1-based, for bias correction
    const std::uint32_t* skip_if = nullptr;  // as SgdHyper's
  };
  virtual void adam_step(std::int64_t count, const AdamHyper& h, float* w, const float* g, float* m,
                         float* v) = 0;

  virtual void fill(std::int64_t count, float value, float* y) = 0;
  virtual void copy(std::int64_t count, const float* x, float* y) = 0;
  virtual void add(std::int64_t count, const float* x, float* y) = 0;  // y += x
  // y = torch.lerp(y, x, weight): y + weight * (x - y) for weight < 0.5, else
  // x - (x - y) * (1 - weight), as PyTorch rounds it (a moving average of the weights).
  virtual void lerp(std::int64_t count, const float* x, float weight, float* y) = 0;
  // A view of n plain NCHW images [n, c, h, w] for test-time augmentation: y[i, ch, r, col] =
  // x[i, ch, reflect(r + dy), reflect(col' + dx)] with col' = w - 1 - col when flip, else col;
  // reflect mirrors about the edge pixels (PyTorch's 'reflect' padding), |dy| < h, |dx| < w.
  virtual void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                          std::int64_t dy, std::int64_t dx, bool flip, const float* x,
                          float* y) = 0;
  // Whether add_activation does its work in one pass for `kind`: a residual add then applies the
  // ReLU after it itself (nn/activation_fusion.hpp). relu and relu6 only (no slope is passed).
  virtual bool add_fuses(Activation /*kind*/) const { return false; }
  // y = act(y + x), bitwise add followed by activation_forward (which is what it does here).
  virtual void add_activation(Activation kind, std::int64_t count, const float* x, float* y) {
    add(count, x, y);
    activation_forward(kind, 0.0f, count, y, y);
  }
  // `rows` rows of `cols` floats: row r of x starts at x + r * x_pitch, of y at y + r * y_pitch
  // (channel concatenation: one row per sample).
  virtual void copy_rows(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_pitch,
                         float* y, std::int64_t y_pitch) = 0;
  // Dynamic loss scaling: g *= inv_scale; returns false when g held an inf or NaN (waits for a
  // GPU).
  virtual bool unscale_check(std::int64_t count, float* g, float inv_scale) = 0;
  // The same without waiting: g *= inv_scale, and overflow flag `slot` (0 .. kOverflowSlots-1) is
  // set when g held an inf or NaN, clear otherwise. Returns the flag, for SgdHyper/AdamHyper's
  // skip_if: the device skips an overflowing step itself. overflow_seen(slot) reads the flag of
  // the latest unscale_flag on that slot, waiting for the device only if it has not got there.
  static constexpr int kOverflowSlots = 4;
  virtual const std::uint32_t* unscale_flag(std::int64_t count, float* g, float inv_scale,
                                            int slot) = 0;
  virtual bool overflow_seen(int slot) = 0;

  // Memory. The defaults are the CPU's (host memory); a device backend overrides all four.
  // A zero-filled tensor of `shape` in this backend's memory.
  virtual Tensor alloc(Shape shape);
  // Host -> backend memory and back, ordered after the work already enqueued; they return when the
  // copy is complete.
  virtual void upload(const float* host, float* dst, std::size_t count);
  virtual void download(const float* src, float* host, std::size_t count);
  // Whether host code may read and write this backend's memory in place: then host mirrors are the
  // buffers themselves (backend::Mirrored) and upload/download are never needed.
  virtual bool host_addressable() const { return device() == Device::cpu; }
  // Waits for everything enqueued so far (a device backend's ops are asynchronous).
  virtual void synchronize() {}
  // Waits for the computation enqueued so far, not for copies in flight (a device backend's
  // uploads of the next batch run on their own stream).
  virtual void synchronize_compute() { synchronize(); }
  // Device memory free now, in bytes (what train.max_micro_batch = auto sizes micro-batches by);
  // 0 where the backend computes in host memory.
  virtual std::size_t free_memory_bytes() const { return 0; }

  // softmax_xent without a host round trip per call: the loss sum and correct count accumulate in
  // the backend (on the device for CUDA) until take_loss() returns and resets them, so a training
  // step needs no host synchronisation. The default runs softmax_xent and adds on the host.
  virtual void softmax_xent_accumulate(std::int64_t n, std::int64_t classes, const float* logits,
                                       const std::int32_t* labels, float label_smoothing,
                                       float grad_scale, float* dlogits);
  virtual LossResult take_loss();

 private:
  LossResult pending_loss_;  // the default softmax_xent_accumulate's sums
};

}  // namespace ddp::backend
