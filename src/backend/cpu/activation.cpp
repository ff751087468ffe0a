// Activations of the CPU backend. The relu family are plain loops the compiler vectorises: memory
// bound, as fast as oneDNN's eltwise kernels forward and faster backward (2M floats, 1 thread:
// 0.25-0.5 ms forward, 0.6-0.8 ms backward, oneDNN 0.3-0.4 and 1.0-1.7 ms), and the same
// expressions as the CUDA kernels, so the two backends agree bit for bit; so is hardswish, which
// needs no transcendental function. gelu and silu run on oneDNN's eltwise primitives, whose JIT
// kernels evaluate erf and exp with vector polynomials: 1.4 ms forward for gelu against 28 ms for
// a loop over the scalar libm erf (silu: 1.3 against 7).
#include <map>
#include <utility>

#include "cpu_kernels.hpp"
#include "ddp/error.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

constexpr std::int64_t kParallelMin = 1 << 16;

// Loads are unconditional and results selected on loaded values, so that GCC vectorises: a
// conditional load, or std::max (which returns a reference), made GCC 12 emit a scalar branch that
// mispredicts on half the activations (6-8x slower).
void relu_family_forward(Activation kind, float alpha, std::int64_t count, const float* x,
                         float* y) {
  switch (kind) {
    case Activation::relu:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;  // NaN stays NaN, as with std::max(x, 0)
      }
      return;
    case Activation::relu6:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float v = x[i];
        const float lo = v < 0.0f ? 0.0f : v;
        y[i] = lo > 6.0f ? 6.0f : lo;
      }
      return;
    case Activation::leaky_relu:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        // Both parts computed and added, so that GCC vectorises (a select of alpha * v stays a
        // branch). Exactly PyTorch's x > 0 ? x : slope * x, NaN and infinities included: one of
        // the two terms is always an exact zero (only the sign of a zero output may differ).
        const float v = x[i];
        const bool pos = v > 0.0f;
        const float p = pos ? v : 0.0f, n = pos ? 0.0f : v;
        y[i] = p + alpha * n;
      }
      return;
    default:
      return;
  }
}

// From the output: with slope >= 0, y > 0 exactly where x > 0 (and relu6's 0 < y < 6 where
// 0 < x < 6), PyTorch's strict inequalities on x.
void relu_family_backward(Activation kind, float alpha, std::int64_t count, const float* y,
                          const float* dy, float* dx) {
  switch (kind) {
    case Activation::relu:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
      }
      return;
    case Activation::relu6:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float g = dy[i], v = y[i];
        dx[i] = (v > 0.0f) & (v < 6.0f) ? g : 0.0f;
      }
      return;
    case Activation::leaky_relu:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float g = dy[i];
        const bool pos = y[i] > 0.0f;
        const float p = pos ? g : 0.0f, n = pos ? 0.0f : g;
        dx[i] = p + alpha * n;
      }
      return;
    default:
      return;
  }
}

// PyTorch's hardswish (aten/src/ATen/native/cpu/Activation.cpp): x * min(max(x + 3, 0), 6) / 6,
// and its gradient from the input: 0 below -3, x / 3 + 1/2 from -3 up to 3, 1 from 3 on. At the
// kink 3 that is the right side's 1, as PyTorch's vectorised CPU kernel gives (its scalar tail and
// its CUDA kernel give the left side's 3/2 there).
void hardswish_forward(std::int64_t count, const float* x, float* y) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = x[i], t = v + 3.0f;
    const float lo = t < 0.0f ? 0.0f : t;
    y[i] = v * (lo > 6.0f ? 6.0f : lo) / 6.0f;
  }
}
void hardswish_backward(std::int64_t count, const float* x, const float* dy, float* dx) {
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = x[i], g = dy[i];
    const float mid = g * (v / 3.0f + 0.5f);
    dx[i] = v < -3.0f ? 0.0f : (v < 3.0f ? mid : g);
  }
}

// oneDNN eltwise primitives over `count` floats, built once per (kind, count) and thread (nothing
// else orders two threads' calls; a network has a few distinct activation sizes).
struct Eltwise {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
  dnnl::memory src, dst, diff_dst, diff_src;
};

Eltwise build(Activation kind, std::int64_t count) {
  // gelu: exact erf form; swish with alpha 1: x * sigmoid(x), silu.
  const auto alg =
      kind == Activation::gelu ? dnnl::algorithm::eltwise_gelu_erf : dnnl::algorithm::eltwise_swish;
  const float alpha = kind == Activation::gelu ? 0.0f : 1.0f;
  const auto d = md({count}, tag::a);
  dnnl::eltwise_forward::primitive_desc fpd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, d, alpha, 0.0f),
      engine());
  dnnl::eltwise_backward::primitive_desc bpd(dnnl::eltwise_backward::desc(alg, d, d, alpha, 0.0f),
                                             engine(), fpd);
  return {dnnl::eltwise_forward(fpd), dnnl::eltwise_backward(bpd), mem(d), mem(d), mem(d), mem(d)};
}

Eltwise& eltwise(Activation kind, std::int64_t count) {
  thread_local std::map<std::pair<Activation, std::int64_t>, Eltwise> cache;
  const auto key = std::make_pair(kind, count);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, build(kind, count)).first;
  return it->second;
}

}  // namespace

void activation_forward(Activation kind, float alpha, std::int64_t count, const float* x,
                        float* y) {
  if (count <= 0) return;
  if (backward_uses_output(kind)) return relu_family_forward(kind, alpha, count, x, y);
  if (kind == Activation::hardswish) return hardswish_forward(count, x, y);
  Eltwise& e = eltwise(kind, count);
  bind(e.src, x);
  bind(e.dst, y);
  e.fwd.execute(stream(), {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DST, e.dst}});
  stream().wait();
}

void activation_backward(Activation kind, float alpha, std::int64_t count, const float* x,
                         const float* y, const float* dy, float* dx) {
  if (count <= 0) return;
  if (backward_uses_output(kind)) return relu_family_backward(kind, alpha, count, y, dy, dx);
  if (kind == Activation::hardswish) return hardswish_backward(count, x, dy, dx);
  Eltwise& e = eltwise(kind, count);
  bind(e.src, x);
  bind(e.diff_dst, dy);
  bind(e.diff_src, dx);
  e.bwd.execute(
      stream(),
      {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DIFF_DST, e.diff_dst}, {DNNL_ARG_DIFF_SRC, e.diff_src}});
  stream().wait();
}

void add_activation(Activation kind, std::int64_t count, const float* x, float* y) {
  // The expressions of add and relu_family_forward, so the result is bitwise theirs.
  switch (kind) {
    case Activation::relu:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float v = y[i] + x[i];
        y[i] = v < 0.0f ? 0.0f : v;
      }
      return;
    case Activation::relu6:
#pragma omp parallel for simd if (count >= kParallelMin) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        const float v = y[i] + x[i];
        const float lo = v < 0.0f ? 0.0f : v;
        y[i] = lo > 6.0f ? 6.0f : lo;
      }
      return;
    default:
      throw Error("internal: the CPU's add_activation takes relu and relu6 only");
  }
}

}  // namespace ddp::backend::cpu
