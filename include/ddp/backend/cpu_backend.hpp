#pragma once
// The CPU backend: oneDNN primitives for convolution, pooling, inner product and batch norm;
// vectorised loops for the element-wise work. Threads come from OpenMP (set_compute_threads).
#include <memory>

#include "ddp/backend/backend.hpp"

namespace ddp::backend {

std::unique_ptr<Backend> make_cpu_backend();

// Number of threads oneDNN and our loops use in this process.
void set_compute_threads(int n);
int compute_threads();

// Whether CPU backends made from now on offer blocked activation layouts (Backend::
// activation_block: 16 channels with AVX-512, 8 with AVX2, none below). On by default; off keeps
// every activation in plain NCHW (tests compare the two; benchmarks measure the difference).
void set_blocked_activations(bool on);
// Whether CPU backends made from now on fuse a ReLU or ReLU6 into the batch norm or residual add
// below it (Backend::batch_norm_fuses, add_fuses). On by default; tests compare the two.
void set_fused_activations(bool on);

}  // namespace ddp::backend
