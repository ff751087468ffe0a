// Batch normalisation (spatial: one mean/variance per channel over N, H and W; for feature vectors
// h = w = 1, the same as per-activation). The running statistics follow PyTorch: running =
// (1 - momentum) * running + momentum * batch statistic, with the unbiased variance. The batch
// mean and inverse standard deviation of the last training forward are kept for backward, as the
// CPU op keeps its mean and variance.
//
// Training runs on kernels of our own by default (CudaOptions::cudnn_batch_norm = false): cuDNN's
// NCHW fp32 spatial batch norm measured at ~140 GB/s on an H200 (bench/results/2026-11-28-h200-
// baseline). They are the CPU op's arithmetic (src/backend/cpu/batch_norm.cpp: sums of x and x^2
// in double, var = E[x^2] - mean^2, which stays accurate for large means in double) as a
// two-level reduction that is deterministic (no atomics; a fixed order for a given shape and
// pointer alignment):
//   1. partial sums: one block per (channel, chunk of kChunk values of that channel), written to
//      a per-op buffer;
//   2. per-channel sums: one warp per channel adds its chunks' partials in a fixed order (then, in
//      a plain training forward, the statistics and the running-statistics update right there);
//   3. the element-wise pass over the same (channel, chunk) blocks, float4 when h*w % 4 == 0 and
//      the pointers are 16-byte aligned.
// Backward is the same with sum(dy) and sum(dy * xhat) (dbeta and dgamma), then dx. Inference is
// the CPU's (x - running_mean) * (gamma / sqrt(running_var + eps)) + beta on the same grid. Sync
// batch norm's split passes (forward_sums ... backward_apply) are these kernels too.
//
// With cudnn_batch_norm (gpu_bench --bn cudnn, for A/B timings) training and inference go through
// cuDNN's legacy API as before (its exponentialAverageFactor update is PyTorch's); sync batch
// norm and the N*H*W <= 1 case (cuDNN would divide by N*H*W - 1 = 0) still use the kernels here.
#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.hpp"
#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

// 256 threads and chunks of 8192 values (32 per thread, 8 float4 loads): C = 16, N*H*W = 512*1024
// gives 64 chunks per channel, 1024 blocks, about 8 per SM on 132 SMs, enough loads in flight to
// stream at memory speed; C = 2048, H*W = 49, N = 128 (6272 values a channel) is one chunk per
// channel, 2048 blocks. Smaller chunks would only add partials for step 2 to add.
constexpr int kThreads = 256;
constexpr std::int64_t kChunk = 8192;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// How the blocks cover a channel: in units of V values (V = 4: float4), a channel's n rows of hwv
// units, cut into chunks of kv units. The grid is one-dimensional (block = ch * chunks + chunk),
// so no grid-dimension limit of 65535 applies.
struct Cover {
  std::int64_t c = 0, hwv = 0, mv = 0, kv = 0, chunks = 0;
  int v = 1;
  unsigned blocks() const { return static_cast<unsigned>(c * chunks); }
};

Cover cover(std::int64_t n, std::int64_t c, std::int64_t hw, int v) {
  Cover k;
  k.c = c;
  k.v = v;
  k.hwv = hw / v;
  k.mv = n * k.hwv;
  k.kv = kChunk / v;
  k.chunks = (k.mv + k.kv - 1) / k.kv;
  return k;
}

template <int V>
__device__ __forceinline__ void load(const float* p, std::int64_t at, float (&out)[V]) {
  if constexpr (V == 4) {
    const float4 q = reinterpret_cast<const float4*>(p)[at];
    out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
  } else {
    out[0] = p[at];
  }
}

template <int V>
__device__ __forceinline__ void store(float* p, std::int64_t at, const float (&v)[V]) {
  if constexpr (V == 4) {
    reinterpret_cast<float4*>(p)[at] = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    p[at] = v[0];
  }
}

// Calls f(unit index) for this thread's units of block (ch, chunk), in increasing order. The
// division by hwv is 32-bit: within a chunk, col0 + l < hwv + kv (checked on the host).
template <class F>
__device__ __forceinline__ void for_chunk(const Cover& k, std::int64_t ch, std::int64_t chunk,
                                          F f) {
  const std::int64_t start = chunk * k.kv;
  const auto len = static_cast<unsigned>(min(k.kv, k.mv - start));
  const std::int64_t row0 = start / k.hwv;
  const auto col0 = static_cast<unsigned>(start - row0 * k.hwv);
  const auto hwv = static_cast<unsigned>(k.hwv);
  for (unsigned l = threadIdx.x; l < len; l += kThreads) {
    const unsigned t = col0 + l, r = t / hwv, col = t - r * hwv;
    f(((row0 + r) * k.c + ch) * k.hwv + col);
  }
}

// Sums a and b over the block (warp shuffles, then the warps' sums): the result in thread 0.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double sa[kThreads / kWarp], sb[kThreads / kWarp];
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    a += __shfl_down_sync(kFullMask, a, o);
    b += __shfl_down_sync(kFullMask, b, o);
  }
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) sa[warp] = a, sb[warp] = b;
  __syncthreads();
  if (warp == 0) {
    a = lane < kThreads / kWarp ? sa[lane] : 0.0;
    b = lane < kThreads / kWarp ? sb[lane] : 0.0;
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      a += __shfl_down_sync(kFullMask, a, o);
      b += __shfl_down_sync(kFullMask, b, o);
    }
  }
}

// Step 1. part[2 * block] = (sum x, sum x^2) of the block's chunk (cpu row_sums), or with Grad
// (sum dy, sum dy * (x - mean) * invstd) (cpu row_grad_sums).
template <int V, bool Grad>
__global__ void __launch_bounds__(kThreads)
    partial_sums_kernel(Cover k, const float* __restrict__ x, const float* __restrict__ dy,
                        const float* __restrict__ mean, const float* __restrict__ invstd,
                        double* __restrict__ part) {
  const std::int64_t ch = blockIdx.x / k.chunks, chunk = blockIdx.x % k.chunks;
  double s = 0.0, q = 0.0;
  if constexpr (Grad) {
    const double mu = mean[ch], is = invstd[ch];
    for_chunk(k, ch, chunk, [&](std::int64_t at) {
      float xv[V], dv[V];
      load<V>(x, at, xv);
      load<V>(dy, at, dv);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        s += dv[e];
        q += static_cast<double>(dv[e]) * ((xv[e] - mu) * is);
      }
    });
  } else {
    for_chunk(k, ch, chunk, [&](std::int64_t at) {
      float xv[V];
      load<V>(x, at, xv);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const double v = xv[e];
        s += v;
        q += v * v;
      }
    });
  }
  block_sum2(s, q);
  if (threadIdx.x == 0) {
    part[2 * static_cast<std::int64_t>(blockIdx.x)] = s;
    part[2 * static_cast<std::int64_t>(blockIdx.x) + 1] = q;
  }
}

// The statistics of m summed samples and the running-statistics update (cpu forward_apply).
__device__ void finalize_channel(std::int64_t ch, double m, double s, double q, float eps,
                                 float momentum, float* running_mean, float* running_var,
                                 float* mean_out, float* invstd_out) {
  if (m <= 0) return;  // no rank had a sample: nothing to normalise or learn from
  const float unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.0f;
  const double mean = s / m;
  const double var = fmax(q / m - mean * mean, 0.0);
  const auto fmean = static_cast<float>(mean);
  mean_out[ch] = fmean;
  invstd_out[ch] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * fmean;
  running_var[ch] = (1 - momentum) * running_var[ch] + momentum * static_cast<float>(var) * unbias;
}

// What step 2 does besides writing the sums: the statistics (a plain training forward), or
// dbeta/dgamma (backward). Null pointers: not wanted.
struct Finish {
  double m = 0;  // values per channel
  float eps = 0, momentum = 0;
  float *running_mean = nullptr, *running_var = nullptr, *mean = nullptr, *invstd = nullptr;
  double* count = nullptr;             // gets m (backward reads it)
  float *f0 = nullptr, *f1 = nullptr;  // float copies of the two sums (dbeta, dgamma)
};

// Step 2: one warp per channel adds the channel's partials (lane l takes chunks l, l + 32, ...,
// then a fixed shuffle tree) into out = [sum a (c) | sum b (c)], and out[2c] = m when `with_count`
// (forward_sums' layout).
__global__ void __launch_bounds__(kThreads)
    channel_sums_kernel(std::int64_t c, std::int64_t chunks, const double* __restrict__ part,
                        double* __restrict__ out, bool with_count, Finish f) {
  const std::int64_t ch = (static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x) / kWarp;
  const unsigned lane = threadIdx.x % kWarp;
  if (ch >= c) return;  // whole warps only: c is the same for all lanes of a warp
  double s = 0.0, q = 0.0;
  for (std::int64_t j = lane; j < chunks; j += kWarp) {
    s += part[2 * (ch * chunks + j)];
    q += part[2 * (ch * chunks + j) + 1];
  }
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    s += __shfl_down_sync(kFullMask, s, o);
    q += __shfl_down_sync(kFullMask, q, o);
  }
  if (lane != 0) return;
  out[ch] = s;
  out[c + ch] = q;
  if (ch == 0 && with_count) out[2 * c] = f.m;
  if (ch == 0 && f.count) *f.count = f.m;
  if (f.f0) f.f0[ch] = static_cast<float>(s);
  if (f.f1) f.f1[ch] = static_cast<float>(q);
  if (f.mean)
    finalize_channel(ch, f.m, s, q, f.eps, f.momentum, f.running_mean, f.running_var, f.mean,
                     f.invstd);
}

// Sync batch norm's finalisation from the all-reduced sums (m = sums[2c]); count gets m.
__global__ void finalize_kernel(std::int64_t c, const double* __restrict__ sums, float eps,
                                float momentum, float* __restrict__ running_mean,
                                float* __restrict__ running_var, float* __restrict__ mean_out,
                                float* __restrict__ invstd_out, double* __restrict__ count) {
  const std::int64_t ch = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double m = sums[2 * c];
  if (ch == 0) *count = m;
  finalize_channel(ch, m, sums[ch], sums[c + ch], eps, momentum, running_mean, running_var,
                   mean_out, invstd_out);
}

// Step 3, forward: y = (x - mean) * a + beta with a = gamma * invstd (training, cpu affine), or
// in inference mean = running mean, a = gamma / sqrt(running var + eps) in double (cpu eval).
template <int V, bool Eval>
__global__ void __launch_bounds__(kThreads)
    apply_kernel(Cover k, const float* __restrict__ x, const float* __restrict__ gamma,
                 const float* __restrict__ beta, const float* __restrict__ mean,
                 const float* __restrict__ invstd_or_var, float eps, float* __restrict__ y) {
  const std::int64_t ch = blockIdx.x / k.chunks, chunk = blockIdx.x % k.chunks;
  const float mu = mean[ch], b = beta[ch];
  const float a = Eval
                      ? static_cast<float>(gamma[ch] / sqrt(static_cast<double>(invstd_or_var[ch]) +
                                                            static_cast<double>(eps)))
                      : gamma[ch] * invstd_or_var[ch];
  for_chunk(k, ch, chunk, [&](std::int64_t at) {
    float v[V];
    load<V>(x, at, v);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = (v[e] - mu) * a + b;
    store<V>(y, at, v);
  });
}

// Step 3, backward: dx = a * (dy - k1 - (x - mean) * invstd * k2), a = gamma * invstd, k1 and k2
// the means of dy and dy * xhat (cpu backward_apply / row_grad).
template <int V>
__global__ void __launch_bounds__(kThreads)
    backward_apply_kernel(Cover k, const float* __restrict__ x, const float* __restrict__ dy,
                          const float* __restrict__ gamma, const float* __restrict__ mean,
                          const float* __restrict__ invstd, const double* __restrict__ sums,
                          const double* __restrict__ count, float* __restrict__ dx) {
  const std::int64_t ch = blockIdx.x / k.chunks, chunk = blockIdx.x % k.chunks;
  const double m = *count;
  const float mu = mean[ch], is = invstd[ch], a = gamma[ch] * is;
  const auto k1 = static_cast<float>(sums[ch] / m);
  const auto k2 = static_cast<float>(sums[k.c + ch] / m);
  for_chunk(k, ch, chunk, [&](std::int64_t at) {
    float xv[V], dv[V];
    load<V>(x, at, xv);
    load<V>(dy, at, dv);
#pragma unroll
    for (int e = 0; e < V; ++e) dv[e] = a * (dv[e] - k1 - (xv[e] - mu) * is * k2);
    store<V>(dx, at, dv);
  });
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

class BatchNorm final : public BatchNormOp {
 public:
  BatchNorm(std::shared_ptr<Context> ctx, const BatchNormGeom& g)
      : ctx_(std::move(ctx)),
        g_(g),
        cudnn_(ctx_->options().cudnn_batch_norm),
        saved_mean_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)),
        saved_inv_std_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)),
        sums_(ctx_->device(), (2 * static_cast<std::size_t>(g.c) + 1) * sizeof(double)),
        dsums_(ctx_->device(), 2 * static_cast<std::size_t>(g.c) * sizeof(double)),
        count_(ctx_->device(), sizeof(double)) {
    if (cudnn_ && static_cast<double>(g.eps) < CUDNN_BN_MIN_EPSILON)
      throw ConfigError("batchnorm: eps = " + std::to_string(g.eps) +
                        " is below cuDNN's minimum of " + std::to_string(CUDNN_BN_MIN_EPSILON));
    // for_chunk's 32-bit column arithmetic: col0 + l < h*w + kChunk.
    if (g.h * g.w > (std::int64_t{1} << 30))
      throw ConfigError("batchnorm: " + std::to_string(g.h) + "x" + std::to_string(g.w) +
                        " values per channel and sample are more than the CUDA kernels handle");
    x_desc_ = make_tensor_desc();
    bn_desc_ = make_tensor_desc();
    set_tensor_4d(bn_desc_, 1, g.c, 1, 1);
  }

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    if (cudnn_) {
      cudnn_forward(n, x, gamma, beta, running_mean, running_var, y, training);
      return;
    }
    split_ = false;
    const std::int64_t hw = g_.h * g_.w;
    const Cover k = cover(n, g_.c, hw, vec_width(x, y));
    if (!training) {
      apply(k, x, gamma, beta, running_mean, running_var, y, true);
      return;
    }
    partial_sums(k, x, nullptr);
    Finish f;
    f.m = static_cast<double>(n * hw);
    f.eps = g_.eps, f.momentum = g_.momentum;
    f.running_mean = running_mean, f.running_var = running_var;
    f.mean = saved_mean_.floats(), f.invstd = saved_inv_std_.floats(),
    f.count = count_.as<double>();
    channel_sums(k, sums_.as<double>(), true, f);
    if (n * hw > 0)
      apply(k, x, gamma, beta, saved_mean_.floats(), saved_inv_std_.floats(), y, false);
    last_train_n_ = n;
  }

  void backward(std::int64_t n, const float* x, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    if (n != last_train_n_)
      throw Error("internal: batch-norm backward without a matching training forward");
    if (cudnn_ && !split_) {
      set_shape(n);
      // beta factors 0: dx, dgamma and dbeta are overwritten, as on the CPU.
      DDP_CUDA_CHECK(cudnnBatchNormalizationBackward(
          ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_desc_, x, x_desc_,
          dy, x_desc_, dx, bn_desc_, gamma, dgamma, dbeta, static_cast<double>(g_.eps),
          saved_mean_.floats(), saved_inv_std_.floats()));
      return;
    }
    backward_sums(n, x, dy, dgamma, dbeta);
    backward_apply(n, x, dy, gamma, dx);
  }

  // Sync batch norm (see BatchNormOp). The saved mean and inverse standard deviation are the
  // summed samples' (float, as the CPU op keeps them), count_ their number, all on the device:
  // nothing here waits for the GPU.
  std::span<double> forward_sums(std::int64_t n, const float* x) override {
    const Cover k = cover(n, g_.c, g_.h * g_.w, vec_width(x));
    partial_sums(k, x, nullptr);
    Finish f;
    f.m = static_cast<double>(n * g_.h * g_.w);
    channel_sums(k, sums_.as<double>(), true, f);
    return {sums_.as<double>(), 2 * static_cast<std::size_t>(g_.c) + 1};
  }

  void forward_apply(std::int64_t n, const float* x, const float* gamma, const float* beta,
                     float* running_mean, float* running_var, float* y) override {
    const unsigned blocks = static_cast<unsigned>((g_.c + kThreads - 1) / kThreads);
    finalize_kernel<<<blocks, kThreads, 0, ctx_->stream()>>>(
        g_.c, sums_.as<double>(), g_.eps, g_.momentum, running_mean, running_var,
        saved_mean_.floats(), saved_inv_std_.floats(), count_.as<double>());
    DDP_CHECK_LAUNCH("finalize_kernel");
    if (n * g_.h * g_.w > 0)
      apply(cover(n, g_.c, g_.h * g_.w, vec_width(x, y)), x, gamma, beta, saved_mean_.floats(),
            saved_inv_std_.floats(), y, false);
    last_train_n_ = n;
  }

  std::span<double> backward_sums(std::int64_t n, const float* x, const float* dy, float* dgamma,
                                  float* dbeta) override {
    if (n != last_train_n_)
      throw Error("internal: batch-norm backward without a matching training forward");
    const Cover k = cover(n, g_.c, g_.h * g_.w, vec_width(x, dy));
    partial_sums(k, x, dy);
    Finish f;
    f.f0 = dbeta, f.f1 = dgamma;
    channel_sums(k, dsums_.as<double>(), false, f);
    return {dsums_.as<double>(), 2 * static_cast<std::size_t>(g_.c)};
  }

  void backward_apply(std::int64_t n, const float* x, const float* dy, const float* gamma,
                      float* dx) override {
    if (!dx || n * g_.h * g_.w == 0) return;
    const Cover k = cover(n, g_.c, g_.h * g_.w, vec_width(x, dy, dx));
    const cudaStream_t s = ctx_->stream();
    if (k.v == 4)
      backward_apply_kernel<4><<<k.blocks(), kThreads, 0, s>>>(
          k, x, dy, gamma, saved_mean_.floats(), saved_inv_std_.floats(), dsums_.as<double>(),
          count_.as<double>(), dx);
    else
      backward_apply_kernel<1><<<k.blocks(), kThreads, 0, s>>>(
          k, x, dy, gamma, saved_mean_.floats(), saved_inv_std_.floats(), dsums_.as<double>(),
          count_.as<double>(), dx);
    DDP_CHECK_LAUNCH("batch-norm backward_apply_kernel");
  }

 private:
  // 4 (float4) when every row of h*w values starts 16-byte aligned: h*w % 4 == 0 and each given
  // pointer aligned (null ones do not count); else 1.
  template <class... P>
  int vec_width(const P*... p) const {
    if ((g_.h * g_.w) % 4 != 0) return 1;
    return ((p == nullptr || aligned16(p)) && ...) ? 4 : 1;
  }

  // The partials of step 1 for cover k (dy null: forward sums), in part_, grown as needed.
  void partial_sums(const Cover& k, const float* x, const float* dy) {
    if (k.chunks == 0) return;  // no values: step 2 writes zero sums
    if (k.c * k.chunks > std::int64_t{0x7fffffff})
      throw Error("internal: batch norm over " + std::to_string(k.mv * k.v) +
                  " values per channel exceeds the grid");
    const auto need = static_cast<std::size_t>(2 * k.c * k.chunks) * sizeof(double);
    // A new (larger) shape: the old buffer's cudaFree waits for the device, only then.
    if (part_.bytes() < need) part_ = DeviceBuffer(ctx_->device(), need);
    const cudaStream_t s = ctx_->stream();
    double* part = part_.as<double>();
    const float* mean = saved_mean_.floats();
    const float* is = saved_inv_std_.floats();
    if (dy) {
      if (k.v == 4)
        partial_sums_kernel<4, true><<<k.blocks(), kThreads, 0, s>>>(k, x, dy, mean, is, part);
      else
        partial_sums_kernel<1, true><<<k.blocks(), kThreads, 0, s>>>(k, x, dy, mean, is, part);
    } else {
      if (k.v == 4)
        partial_sums_kernel<4, false><<<k.blocks(), kThreads, 0, s>>>(k, x, dy, mean, is, part);
      else
        partial_sums_kernel<1, false><<<k.blocks(), kThreads, 0, s>>>(k, x, dy, mean, is, part);
    }
    DDP_CHECK_LAUNCH("batch-norm partial_sums_kernel");
  }

  void channel_sums(const Cover& k, double* out, bool with_count, const Finish& f) {
    const std::int64_t threads = k.c * kWarp;
    const auto blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
    channel_sums_kernel<<<blocks, kThreads, 0, ctx_->stream()>>>(k.c, k.chunks, part_.as<double>(),
                                                                 out, with_count, f);
    DDP_CHECK_LAUNCH("batch-norm channel_sums_kernel");
  }

  void apply(const Cover& k, const float* x, const float* gamma, const float* beta,
             const float* mean, const float* invstd_or_var, float* y, bool eval) {
    if (k.chunks == 0) return;
    const cudaStream_t s = ctx_->stream();
    if (eval) {
      if (k.v == 4)
        apply_kernel<4, true>
            <<<k.blocks(), kThreads, 0, s>>>(k, x, gamma, beta, mean, invstd_or_var, g_.eps, y);
      else
        apply_kernel<1, true>
            <<<k.blocks(), kThreads, 0, s>>>(k, x, gamma, beta, mean, invstd_or_var, g_.eps, y);
    } else {
      if (k.v == 4)
        apply_kernel<4, false>
            <<<k.blocks(), kThreads, 0, s>>>(k, x, gamma, beta, mean, invstd_or_var, g_.eps, y);
      else
        apply_kernel<1, false>
            <<<k.blocks(), kThreads, 0, s>>>(k, x, gamma, beta, mean, invstd_or_var, g_.eps, y);
    }
    DDP_CHECK_LAUNCH("batch-norm apply_kernel");
  }

  // The cuDNN path (CudaOptions::cudnn_batch_norm).
  void cudnn_forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
                     float* running_mean, float* running_var, float* y, bool training) {
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

  void set_shape(std::int64_t n) {
    if (n == shape_n_) return;
    set_tensor_4d(x_desc_, n, g_.c, g_.h, g_.w);
    shape_n_ = n;
  }

  std::shared_ptr<Context> ctx_;
  BatchNormGeom g_;
  bool cudnn_;  // CudaOptions::cudnn_batch_norm
  TensorDesc x_desc_, bn_desc_;
  std::int64_t shape_n_ = -1;
  std::int64_t last_train_n_ = -1;
  bool split_ = false;  // cuDNN mode: the last training forward took the split passes
  DeviceBuffer saved_mean_, saved_inv_std_;  // of the last training forward
  DeviceBuffer sums_, dsums_, count_;        // per-channel sums (doubles) and values summed
  DeviceBuffer part_;                        // step 1's partials, 2 doubles per block
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(std::shared_ptr<Context> ctx, const BatchNormGeom& g) {
  // Backend::batch_norm_fuses is false here: the activation stays a layer of its own.
  if (g.activation) throw Error("internal: the CUDA batch norm has no fused activation");
  return std::make_unique<BatchNorm>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
