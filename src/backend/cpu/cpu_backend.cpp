// The CPU backend object: wires the Backend interface to the oneDNN ops and the free kernels.
#include "ddp/backend/cpu_backend.hpp"

#include <omp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "cpu_kernels.hpp"
#include "cpu_ops.hpp"
#include "ddp/error.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend {
namespace cpu {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

void check_block(int block, std::int64_t channels, const char* what) {
  if ((block != 0 && block != 8 && block != 16) || (block != 0 && channels % block != 0))
    throw Error(std::string("internal: ") + what + " of " + std::to_string(channels) +
                " channels in a blocked layout of " + std::to_string(block));
}

// One per thread: reproducible mode runs primitives on several threads at once.
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

namespace {

std::atomic<bool> blocked_activations{true};
std::atomic<bool> fused_activations{true};

// The channel block of oneDNN's direct convolution kernels on this CPU (its ISA values are bit
// masks, each including the ones below).
int isa_block() {
  const auto has = [](dnnl::cpu_isa want) {
    const auto w = static_cast<unsigned>(want);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & w) == w;
  };
  if (has(dnnl::cpu_isa::avx512_core)) return 16;
  if (has(dnnl::cpu_isa::avx2)) return 8;
  return 0;
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu; }
  std::string name() const override { return "cpu (oneDNN)"; }

  int activation_block() const override { return block_; }
  std::unique_ptr<ConvOp> conv(const ConvGeom& g) override { return make_conv(g); }
  std::unique_ptr<PoolOp> pool(const PoolGeom& g) override { return make_pool(g); }
  std::unique_ptr<LinearOp> linear(const LinearGeom& g) override { return make_linear(g); }
  std::unique_ptr<BatchNormOp> batch_norm(const BatchNormGeom& g) override {
    return make_batch_norm(g);
  }
  bool batch_norm_fuses(Activation kind) const override {
    return fuse_ && (kind == Activation::relu || kind == Activation::relu6);
  }
  bool add_fuses(Activation kind) const override { return batch_norm_fuses(kind); }

  void activation_forward(Activation kind, float alpha, std::int64_t count, const float* x,
                          float* y) override {
    cpu::activation_forward(kind, alpha, count, x, y);
  }
  void activation_backward(Activation kind, float alpha, std::int64_t count, const float* x,
                           const float* y, const float* dy, float* dx) override {
    cpu::activation_backward(kind, alpha, count, x, y, dy, dx);
  }
  void dropout_forward(std::int64_t n, std::int64_t per_sample, float p, std::uint64_t seed,
                       const std::int64_t* sample_ids, const float* x, float* mask,
                       float* y) override {
    cpu::dropout_forward(n, per_sample, p, seed, sample_ids, x, mask, y);
  }
  void mul(std::int64_t count, const float* a, const float* b, float* y) override {
    cpu::mul(count, a, b, y);
  }
  LossResult softmax_xent(std::int64_t n, std::int64_t classes, const float* logits,
                          const std::int32_t* labels, float label_smoothing, float grad_scale,
                          float* dlogits) override {
    return cpu::softmax_xent(n, classes, logits, labels, label_smoothing, grad_scale, dlogits);
  }
  void sgd_step(std::int64_t count, const SgdHyper& h, float* w, const float* g,
                float* m) override {
    cpu::sgd_step(count, h, w, g, m);
  }
  void adam_step(std::int64_t count, const AdamHyper& h, float* w, const float* g, float* m,
                 float* v) override {
    cpu::adam_step(count, h, w, g, m, v);
  }
  void fill(std::int64_t count, float value, float* y) override { cpu::fill(count, value, y); }
  void copy(std::int64_t count, const float* x, float* y) override { cpu::copy(count, x, y); }
  void add(std::int64_t count, const float* x, float* y) override { cpu::add(count, x, y); }
  void lerp(std::int64_t count, const float* x, float weight, float* y) override {
    cpu::lerp(count, x, weight, y);
  }
  void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t dy,
                  std::int64_t dx, bool flip, const float* x, float* y) override {
    cpu::image_view(n, c, h, w, dy, dx, flip, x, y);
  }
  void add_activation(Activation kind, std::int64_t count, const float* x, float* y) override {
    cpu::add_activation(kind, count, x, y);
  }
  void copy_rows(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_pitch,
                 float* y, std::int64_t y_pitch) override {
    cpu::copy_rows(rows, cols, x, x_pitch, y, y_pitch);
  }
  bool unscale_check(std::int64_t count, float* g, float inv_scale) override {
    return cpu::unscale_check(count, g, inv_scale);
  }
  const std::uint32_t* unscale_flag(std::int64_t count, float* g, float inv_scale,
                                    int slot) override {
    std::uint32_t& f = overflow_.at(static_cast<std::size_t>(slot));
    f = cpu::unscale_check(count, g, inv_scale) ? 0u : 1u;
    return &f;
  }
  bool overflow_seen(int slot) override {
    return overflow_.at(static_cast<std::size_t>(slot)) != 0;
  }

 private:
  std::array<std::uint32_t, kOverflowSlots> overflow_{};
  int block_ = blocked_activations ? isa_block() : 0;
  bool fuse_ = fused_activations;
};

}  // namespace
}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<cpu::CpuBackend>();
}

void set_compute_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int compute_threads() {
  return omp_get_max_threads();
}

void use_one_compute_thread_here() {
  // OpenMP's nthreads-var is per thread: the main thread's setting stays.
  omp_set_num_threads(1);
}

std::string cpu_isa_name() {
  using isa = dnnl::cpu_isa;
  const auto has = [](isa want) {
    const auto w = static_cast<unsigned>(want);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & w) == w;
  };
  // Most specific first (each ISA value includes the ones below it).
  for (const auto& [i, name] : {std::pair{isa::avx512_core_amx, "avx512_core_amx"},
                                {isa::avx512_core_bf16, "avx512_core_bf16"},
                                {isa::avx512_core_vnni, "avx512_core_vnni"},
                                {isa::avx512_core, "avx512_core"},
                                {isa::avx2_vnni, "avx2_vnni"},
                                {isa::avx2, "avx2"},
                                {isa::avx, "avx"},
                                {isa::sse41, "sse41"}})
    if (has(i)) return name;
  return "generic";
}

void set_blocked_activations(bool on) {
  cpu::blocked_activations = on;
}

void set_fused_activations(bool on) {
  cpu::fused_activations = on;
}

}  // namespace ddp::backend
