// Batch normalisation on cuDNN (spatial mode: one mean/variance per channel over N, H and W; for
// feature vectors h = w = 1, the same as per-activation). The running statistics follow PyTorch:
// running = (1 - momentum) * running + momentum * batch statistic, with the unbiased variance,
// which is what cuDNN's exponentialAverageFactor update computes (PyTorch hands its running
// buffers to cuDNN unchanged). The batch mean and inverse standard deviation of the last training
// forward are kept for backward, as the CPU op keeps its mean and variance.
//
// Sync batch norm is small kernels of our own (cuDNN cannot take statistics from outside in
// training): per-channel sums in double by one block per channel (a fixed reduction tree, so
// deterministic), a per-channel finalisation, and element-wise normalisation - the CPU op's loops.
#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

constexpr int kSumThreads = 256;   // one block per channel
constexpr int kElemThreads = 256;  // element-wise kernels

unsigned elem_blocks(std::int64_t count) {
  const std::int64_t b = (count + kElemThreads - 1) / kElemThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(b, 1, 8192));
}

// Sums a[tid] and b[tid] over the block into a[0] and b[0].
__device__ void block_sum2(double* a, double* b) {
  for (int stride = kSumThreads / 2; stride > 0; stride >>= 1) {
    if (static_cast<int>(threadIdx.x) < stride) {
      a[threadIdx.x] += a[threadIdx.x + stride];
      b[threadIdx.x] += b[threadIdx.x + stride];
    }
    __syncthreads();
  }
}

// out = [sum x (c) | sum x^2 (c) | n*hw] (cpu BatchNorm::forward_sums). Grid: c blocks.
__global__ void forward_sums_kernel(std::int64_t n, std::int64_t c, std::int64_t hw,
                                    const float* __restrict__ x, double* __restrict__ out) {
  __shared__ double s[kSumThreads], q[kSumThreads];
  const std::int64_t ch = blockIdx.x, total = n * hw;
  double ls = 0.0, lq = 0.0;
  for (std::int64_t k = threadIdx.x; k < total; k += kSumThreads) {
    const double v = x[((k / hw) * c + ch) * hw + k % hw];
    ls += v;
    lq += v * v;
  }
  s[threadIdx.x] = ls;
  q[threadIdx.x] = lq;
  __syncthreads();
  block_sum2(s, q);
  if (threadIdx.x == 0) {
    out[ch] = s[0];
    out[c + ch] = q[0];
    if (ch == 0) out[2 * c] = static_cast<double>(total);  // values per channel
  }
}

// Statistics of the summed samples and the running-statistics update (cpu forward_apply).
// count (device) gets the summed sample count for backward.
__global__ void finalize_kernel(std::int64_t c, const double* __restrict__ sums, float eps,
                                float momentum, float* __restrict__ running_mean,
                                float* __restrict__ running_var, float* __restrict__ mean_out,
                                float* __restrict__ invstd_out, double* __restrict__ count) {
  const std::int64_t ch = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double m = sums[2 * c];
  if (ch == 0) *count = m;
  if (m <= 0) return;
  const float unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.0f;
  const double mean = sums[ch] / m;
  const double var = fmax(sums[c + ch] / m - mean * mean, 0.0);
  mean_out[ch] = static_cast<float>(mean);
  invstd_out[ch] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * mean_out[ch];
  running_var[ch] = (1 - momentum) * running_var[ch] + momentum * static_cast<float>(var) * unbias;
}

__global__ void apply_kernel(std::int64_t total, std::int64_t c, std::int64_t hw,
                             const float* __restrict__ x, const float* __restrict__ gamma,
                             const float* __restrict__ beta, const float* __restrict__ mean,
                             const float* __restrict__ invstd, float* __restrict__ y) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const std::int64_t ch = (i / hw) % c;
    y[i] = (x[i] - mean[ch]) * (gamma[ch] * invstd[ch]) + beta[ch];
  }
}

// out = [sum dy (c) | sum dy*xhat (c)], dbeta and dgamma the same (cpu backward_sums).
__global__ void backward_sums_kernel(std::int64_t n, std::int64_t c, std::int64_t hw,
                                     const float* __restrict__ x, const float* __restrict__ dy,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ invstd, double* __restrict__ out,
                                     float* __restrict__ dgamma, float* __restrict__ dbeta) {
  __shared__ double s[kSumThreads], t[kSumThreads];
  const std::int64_t ch = blockIdx.x, total = n * hw;
  const double mu = mean[ch], is = invstd[ch];
  double ls = 0.0, lt = 0.0;
  for (std::int64_t k = threadIdx.x; k < total; k += kSumThreads) {
    const std::int64_t i = ((k / hw) * c + ch) * hw + k % hw;
    ls += dy[i];
    lt += static_cast<double>(dy[i]) * ((x[i] - mu) * is);
  }
  s[threadIdx.x] = ls;
  t[threadIdx.x] = lt;
  __syncthreads();
  block_sum2(s, t);
  if (threadIdx.x == 0) {
    out[ch] = s[0];
    out[c + ch] = t[0];
    dbeta[ch] = static_cast<float>(s[0]);
    dgamma[ch] = static_cast<float>(t[0]);
  }
}

// dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) (cpu backward_apply).
__global__ void backward_apply_kernel(std::int64_t total, std::int64_t c, std::int64_t hw,
                                      const float* __restrict__ x, const float* __restrict__ dy,
                                      const float* __restrict__ gamma,
                                      const float* __restrict__ mean,
                                      const float* __restrict__ invstd,
                                      const double* __restrict__ sums,
                                      const double* __restrict__ count, float* __restrict__ dx) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const double m = *count;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const std::int64_t ch = (i / hw) % c;
    const float is = invstd[ch], a = gamma[ch] * is;
    const auto k1 = static_cast<float>(sums[ch] / m);
    const auto k2 = static_cast<float>(sums[c + ch] / m);
    dx[i] = a * (dy[i] - k1 - (x[i] - mean[ch]) * is * k2);
  }
}

class BatchNorm final : public BatchNormOp {
 public:
  BatchNorm(std::shared_ptr<Context> ctx, const BatchNormGeom& g)
      : ctx_(std::move(ctx)),
        g_(g),
        saved_mean_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)),
        saved_inv_std_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)),
        sums_(ctx_->device(), (2 * static_cast<std::size_t>(g.c) + 1) * sizeof(double)),
        dsums_(ctx_->device(), 2 * static_cast<std::size_t>(g.c) * sizeof(double)),
        count_(ctx_->device(), sizeof(double)) {
    if (static_cast<double>(g.eps) < CUDNN_BN_MIN_EPSILON)
      throw ConfigError("batchnorm: eps = " + std::to_string(g.eps) +
                        " is below cuDNN's minimum of " + std::to_string(CUDNN_BN_MIN_EPSILON));
    x_desc_ = make_tensor_desc();
    bn_desc_ = make_tensor_desc();
    set_tensor_4d(bn_desc_, 1, g.c, 1, 1);
  }

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    set_shape(n);
    // One value per channel: cuDNN's unbiased running variance would divide by N*H*W - 1 = 0. The
    // split passes (the CPU's arithmetic) keep the biased one there, as the CPU does.
    split_ = training && n * g_.h * g_.w <= 1;
    if (split_) {
      forward_sums(n, x);
      forward_apply(n, x, gamma, beta, running_mean, running_var, y);
      return;
    }
    if (training) {
      DDP_CUDA_CHECK(cudnnBatchNormalizationForwardTraining(
          ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, bn_desc_,
          gamma, beta, static_cast<double>(g_.momentum), running_mean, running_var,
          static_cast<double>(g_.eps), saved_mean_.floats(), saved_inv_std_.floats()));
      last_train_n_ = n;
    } else {
      DDP_CUDA_CHECK(cudnnBatchNormalizationForwardInference(
          ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, bn_desc_,
          gamma, beta, running_mean, running_var, static_cast<double>(g_.eps)));
    }
  }

  void backward(std::int64_t n, const float* x, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    if (n != last_train_n_)
      throw Error("internal: batch-norm backward without a matching training forward");
    if (split_) {
      backward_sums(n, x, dy, dgamma, dbeta);
      backward_apply(n, x, dy, gamma, dx);
      return;
    }
    set_shape(n);
    // beta factors 0: dx, dgamma and dbeta are overwritten, as on the CPU.
    DDP_CUDA_CHECK(cudnnBatchNormalizationBackward(
        ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_desc_, x, x_desc_,
        dy, x_desc_, dx, bn_desc_, gamma, dgamma, dbeta, static_cast<double>(g_.eps),
        saved_mean_.floats(), saved_inv_std_.floats()));
  }

  // Sync batch norm (see BatchNormOp). The saved mean and inverse standard deviation are the
  // summed samples' (float, as the CPU op keeps them), count_ their number, all on the device:
  // nothing here waits for the GPU.
  std::span<double> forward_sums(std::int64_t n, const float* x) override {
    forward_sums_kernel<<<static_cast<unsigned>(g_.c), kSumThreads, 0, ctx_->stream()>>>(
        n, g_.c, g_.h * g_.w, x, sums_.as<double>());
    DDP_CHECK_LAUNCH("forward_sums_kernel");
    return {sums_.as<double>(), 2 * static_cast<std::size_t>(g_.c) + 1};
  }

  void forward_apply(std::int64_t n, const float* x, const float* gamma, const float* beta,
                     float* running_mean, float* running_var, float* y) override {
    const unsigned blocks = static_cast<unsigned>((g_.c + kElemThreads - 1) / kElemThreads);
    finalize_kernel<<<blocks, kElemThreads, 0, ctx_->stream()>>>(
        g_.c, sums_.as<double>(), g_.eps, g_.momentum, running_mean, running_var,
        saved_mean_.floats(), saved_inv_std_.floats(), count_.as<double>());
    DDP_CHECK_LAUNCH("finalize_kernel");
    const std::int64_t total = n * g_.c * g_.h * g_.w;
    if (total > 0) {
      apply_kernel<<<elem_blocks(total), kElemThreads, 0, ctx_->stream()>>>(
          total, g_.c, g_.h * g_.w, x, gamma, beta, saved_mean_.floats(), saved_inv_std_.floats(),
          y);
      DDP_CHECK_LAUNCH("apply_kernel");
    }
    last_train_n_ = n;
  }

  std::span<double> backward_sums(std::int64_t n, const float* x, const float* dy, float* dgamma,
                                  float* dbeta) override {
    if (n != last_train_n_)
      throw Error("internal: batch-norm backward without a matching training forward");
    backward_sums_kernel<<<static_cast<unsigned>(g_.c), kSumThreads, 0, ctx_->stream()>>>(
        n, g_.c, g_.h * g_.w, x, dy, saved_mean_.floats(), saved_inv_std_.floats(),
        dsums_.as<double>(), dgamma, dbeta);
    DDP_CHECK_LAUNCH("backward_sums_kernel");
    return {dsums_.as<double>(), 2 * static_cast<std::size_t>(g_.c)};
  }

  void backward_apply(std::int64_t n, const float* x, const float* dy, const float* gamma,
                      float* dx) override {
    const std::int64_t total = n * g_.c * g_.h * g_.w;
    if (!dx || total == 0) return;
    backward_apply_kernel<<<elem_blocks(total), kElemThreads, 0, ctx_->stream()>>>(
        total, g_.c, g_.h * g_.w, x, dy, gamma, saved_mean_.floats(), saved_inv_std_.floats(),
        dsums_.as<double>(), count_.as<double>(), dx);
    DDP_CHECK_LAUNCH("backward_apply_kernel");
  }

 private:
  void set_shape(std::int64_t n) {
    if (n == shape_n_) return;
    set_tensor_4d(x_desc_, n, g_.c, g_.h, g_.w);
    shape_n_ = n;
  }

  std::shared_ptr<Context> ctx_;
  BatchNormGeom g_;
  TensorDesc x_desc_, bn_desc_;
  std::int64_t shape_n_ = -1;
  std::int64_t last_train_n_ = -1;
  bool split_ = false;  // the last training forward took the split passes (N*H*W <= 1)
  DeviceBuffer saved_mean_, saved_inv_std_;  // of the last training forward
  DeviceBuffer sums_, dsums_, count_;        // sync batch norm (doubles)
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(std::shared_ptr<Context> ctx, const BatchNormGeom& g) {
  // Backend::batch_norm_fuses is false here: the activation stays a layer of its own.
  if (g.activation) throw Error("internal: the CUDA batch norm has no fused activation");
  return std::make_unique<BatchNorm>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
