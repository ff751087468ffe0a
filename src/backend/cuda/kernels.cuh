#pragma once
// The backend's own CUDA kernels (everything cuDNN and cuBLAS do not do): dropout, the loss,
// optimizer updates and element-wise work. Each mirrors a function of src/backend/cpu/ (named in
// kernels.cu) with the same arithmetic in the same order, so that with --fmad=false the results
// round like the CPU's. Launchers enqueue on `stream` and check the launch.
#include <cuda_runtime.h>

#include <cstdint>

#include "ddp/backend/backend.hpp"

namespace ddp::backend::cuda {

// Device-side accumulators of the loss (softmax_xent / softmax_xent_accumulate).
struct LossAccumulator {
  double loss_sum;
  unsigned long long correct;
  unsigned long long bad_labels;  // labels outside [0, classes): reported as an error by the host
};

void launch_dropout(cudaStream_t s, std::int64_t n, std::int64_t per_sample,
                    std::uint64_t threshold, float keep_scale, std::uint64_t seed,
                    const std::int64_t* sample_ids, const float* x, float* mask, float* y);
// y = f(x) and dx = f'(x) * dy (Backend::activation_forward / activation_backward).
void launch_activation_forward(cudaStream_t s, Activation kind, float alpha, std::int64_t count,
                               const float* x, float* y);
void launch_activation_backward(cudaStream_t s, Activation kind, float alpha, std::int64_t count,
                                const float* x, const float* y, const float* dy, float* dx);
void launch_mul(cudaStream_t s, std::int64_t count, const float* a, const float* b, float* y);
void launch_fill(cudaStream_t s, std::int64_t count, float value, float* y);
void launch_add(cudaStream_t s, std::int64_t count, const float* x, float* y);
// y = torch.lerp(y, x, weight) (Backend::lerp).
void launch_lerp(cudaStream_t s, std::int64_t count, const float* x, float weight, float* y);
// A reflect-padded translation and optional flip of n NCHW images (Backend::image_view).
void launch_image_view(cudaStream_t s, std::int64_t n, std::int64_t c, std::int64_t h,
                       std::int64_t w, std::int64_t dy, std::int64_t dx, bool flip, const float* x,
                       float* y);
void launch_sgd(cudaStream_t s, std::int64_t count, const Backend::SgdHyper& h, float* w,
                const float* g, float* m);
// bc1 = 1 - beta1^t, bc2_sqrt = sqrt(1 - beta2^t), computed on the host as the CPU does.
void launch_adam(cudaStream_t s, std::int64_t count, const Backend::AdamHyper& h, float bc1,
                 float bc2_sqrt, float* w, const float* g, float* m, float* v);

// Softmax cross-entropy from cuDNN's log-softmax `logp` ([n, classes]) and the logits (argmax):
// per-sample loss and correctness into `per_sample` (n doubles) and `flags` (n bytes: 1 correct,
// 2 bad label), dlogits (may be null), then one deterministic single-block reduction added into
// `acc`.
void launch_xent(cudaStream_t s, std::int64_t n, std::int64_t classes, const float* logits,
                 const float* logp, const std::int32_t* labels, float label_smoothing,
                 float grad_scale, float* dlogits, double* per_sample, unsigned char* flags,
                 LossAccumulator* acc);

// Dynamic loss scaling (cpu::unscale_check): g *= inv_scale; *bad (device) becomes non-zero when
// an element of g was an inf or NaN. The caller zeroes *bad first.
void launch_unscale_check(cudaStream_t s, std::int64_t count, float* g, float inv_scale,
                          unsigned int* bad);

// Reduced-precision copies for the tensor-core paths of convolution and linear layers.
enum class Half { fp16, bf16 };
// fp32 -> fp16/bf16 (round to nearest even) into `out` (count 2-byte values).
void launch_to_half(cudaStream_t s, Half h, std::int64_t count, const float* x, void* out);
// fp16/bf16 -> fp32.
void launch_from_half(cudaStream_t s, Half h, std::int64_t count, const void* x, float* out);

// A kernel of this file, for cudaFuncGetAttributes: tells whether this build has code for the GPU.
const void* probe_kernel();

}  // namespace ddp::backend::cuda
