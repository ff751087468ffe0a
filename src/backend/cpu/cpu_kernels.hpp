#pragma once
// The CPU backend's free kernels (element-wise, loss, optimizer updates).
#include <cstdint>

#include "ddp/backend/backend.hpp"

namespace ddp::backend::cpu {

// Elements below which an element-wise kernel's OpenMP loop runs on one thread: forking the team
// costs more than the loop.
inline constexpr std::int64_t kParallelMin = 1 << 16;

void activation_forward(Activation kind, float alpha, std::int64_t count, const float* x, float* y);
// y = act(y + x) for relu and relu6 (the residual add with the ReLU after it), one pass.
void add_activation(Activation kind, std::int64_t count, const float* x, float* y);
void activation_backward(Activation kind, float alpha, std::int64_t count, const float* x,
                         const float* y, const float* dy, float* dx);
void dropout_forward(std::int64_t n, std::int64_t per_sample, float p, std::uint64_t seed,
                     const std::int64_t* sample_ids, const float* x, float* mask, float* y);
void mul(std::int64_t count, const float* a, const float* b, float* y);
void fill(std::int64_t count, float value, float* y);
void copy(std::int64_t count, const float* x, float* y);
void add(std::int64_t count, const float* x, float* y);
void lerp(std::int64_t count, const float* x, float weight, float* y);
void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t dy,
                std::int64_t dx, bool flip, const float* x, float* y);
void copy_rows(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_pitch, float* y,
               std::int64_t y_pitch);
bool unscale_check(std::int64_t count, float* g, float inv_scale);
Backend::LossResult softmax_xent(std::int64_t n, std::int64_t classes, const float* logits,
                                 const std::int32_t* labels, float label_smoothing,
                                 float grad_scale, float* dlogits);
void sgd_step(std::int64_t count, const Backend::SgdHyper& h, float* w, const float* g, float* m);
void adam_step(std::int64_t count, const Backend::AdamHyper& h, float* w, const float* g, float* m,
               float* v);

}  // namespace ddp::backend::cpu
