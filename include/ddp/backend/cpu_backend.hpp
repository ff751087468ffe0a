#pragma once
// The CPU backend: oneDNN primitives for convolution, pooling, inner product and batch norm;
// vectorised loops for the element-wise work. Threads come from OpenMP (set_compute_threads).
#include <memory>
#include <string>

#include "ddp/backend/backend.hpp"

namespace ddp::backend {

std::unique_ptr<Backend> make_cpu_backend();

// Number of threads oneDNN and our loops use in this process.
void set_compute_threads(int n);
int compute_threads();
// The kernels this thread calls from now on run on it alone (oneDNN primitives made and run with
// one thread, our loops without a team): reproducible mode computes each chunk on one thread,
// so that its result does not depend on how many threads a rank has. For threads other than the
// main one (OpenMP keeps the setting per thread).
void use_one_compute_thread_here();
// The instruction set oneDNN's kernels use on this CPU ("avx512_core", "avx2", ...): the kernels,
// and with them the rounding of every sum, differ between instruction sets.
std::string cpu_isa_name();

// Whether CPU backends made from now on offer blocked activation layouts (Backend::
// activation_block: 16 channels with AVX-512, 8 with AVX2, none below). On by default; off keeps
// every activation in plain NCHW (tests compare the two; benchmarks measure the difference).
void set_blocked_activations(bool on);
// Whether CPU backends made from now on fuse a ReLU or ReLU6 into the batch norm or residual add
// below it (Backend::batch_norm_fuses, add_fuses). On by default; tests compare the two.
void set_fused_activations(bool on);

}  // namespace ddp::backend
