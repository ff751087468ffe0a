// The CUDA backend against the CPU backend (the reference, itself gradient-checked in
// layer_gradcheck_test.cpp): every op's forward and backward on the same random inputs, with the
// tolerance each comparison allows written next to it. Without a usable GPU (or without the backend
// built in) the comparisons are reported as SKIPPED with the reason; the availability tests run
// everywhere.
#include "ddp/backend/cuda_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"

namespace ddp::backend {
namespace {

#define DDP_REQUIRE_CUDA()                                         \
  do {                                                             \
    const std::string why_ = cuda_unavailable_reason();            \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

std::vector<float> random_vec(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                              float hi = 1.0f) {
  CounterRng rng(hash_words(seed, 77));
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.next_float();
  return v;
}

// |gpu - cpu| <= atol + rtol * |cpu| element-wise, with atol relative to the largest |cpu| value
// (atol_rel * max|cpu|), so one tolerance fits tensors of any scale. Reports the worst element.
void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, double atol_rel,
                  double rtol, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  double scale = 0;
  for (float v : cpu) scale = std::max(scale, static_cast<double>(std::abs(v)));
  const double atol = atol_rel * std::max(scale, 1e-30);
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double err = std::abs(static_cast<double>(gpu[i]) - cpu[i]);
    const double allowed = atol + rtol * std::abs(static_cast<double>(cpu[i]));
    const double ratio = err / allowed;
    if (!(ratio <= worst)) {  // NaN-safe: a NaN becomes the worst
      worst = ratio;
      at = i;
    }
  }
  EXPECT_LE(worst, 1.0) << what << ": worst element " << at << " cpu " << cpu[at] << " gpu "
                        << gpu[at] << " (max |cpu| " << scale << ")";
}

void expect_equal(const std::vector<float>& cpu, const std::vector<float>& gpu,
                  const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    if (!(cpu[i] == gpu[i])) {
      if (mismatches++ == 0) first = i;
    }
  EXPECT_EQ(mismatches, 0u) << what << ": first mismatch at " << first << " cpu " << cpu[first]
                            << " gpu " << gpu[first];
}

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    DDP_REQUIRE_CUDA();
    cpu_ = make_cpu_backend();
    gpu_ = make_cuda_backend(0);
  }

  // A device copy of `host` (or `n` zeros).
  DeviceBuffer up(const std::vector<float>& host) {
    DeviceBuffer b(gpu_->device_index(), std::max<std::size_t>(host.size(), 1) * sizeof(float));
    gpu_->to_device(host.data(), b.data(), host.size() * sizeof(float));
    return b;
  }
  DeviceBuffer zeros(std::size_t n) {
    return DeviceBuffer(gpu_->device_index(), std::max<std::size_t>(n, 1) * sizeof(float));
  }
  std::vector<float> down(const DeviceBuffer& b, std::size_t n) {
    std::vector<float> h(n);
    gpu_->to_host(b.data(), h.data(), n * sizeof(float));
    return h;
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

// --- convolution
// ----------------------------------------------------------------------------------- Tolerance:
// cuDNN may pick FFT or Winograd algorithms (exact in exact arithmetic, rounding differently from
// oneDNN's direct/GEMM sums; measured in cuDNN's own tests at ~1e-4 of the output scale in fp32),
// and the weight gradient sums n*oh*ow products in a different order. TF32 is off (CudaOptions
// default). So: 5e-4 of the tensor's largest magnitude, plus 1e-3 relative.

struct ConvCase {
  const char* name;
  ConvGeom g;
  std::int64_t n;
};

ConvGeom conv_geom(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                   std::int64_t stride, std::int64_t pad, bool bias) {
  ConvGeom g;
  g.c = c, g.h = h, g.w = w, g.k = k, g.r = g.s = r, g.bias = bias;
  g.stride_h = g.stride_w = stride, g.pad_h = g.pad_w = pad;
  g.oh = (h + 2 * pad - r) / stride + 1;
  g.ow = (w + 2 * pad - r) / stride + 1;
  return g;
}

// Groups, dilation and per-axis geometry on top of conv_geom's.
ConvGeom conv_geom_ex(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                      std::int64_t groups, std::int64_t r, std::int64_t s, std::int64_t sh,
                      std::int64_t sw, std::int64_t ph, std::int64_t pw, std::int64_t dh,
                      std::int64_t dw) {
  ConvGeom g = conv_geom(c, h, w, k, r, 1, 0, true);
  g.s = s, g.groups = groups;
  g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw, g.dil_h = dh, g.dil_w = dw;
  g.oh = (h + 2 * ph - (r - 1) * dh - 1) / sh + 1;
  g.ow = (w + 2 * pw - (s - 1) * dw - 1) / sw + 1;
  return g;
}

TEST_F(CudaVsCpu, ConvolutionForwardBackward) {
  const ConvCase cases[] = {
      {"lenet.conv1 3x32x32 k5", conv_geom(3, 32, 32, 6, 5, 1, 0, true), 8},
      {"lenet.conv2 6x14x14 k5", conv_geom(6, 14, 14, 16, 5, 1, 0, true), 8},
      {"vgg.conv2 32x16x16 k3 p1", conv_geom(32, 16, 16, 64, 3, 1, 1, true), 4},
      {"odd 8x9x7 k3 s2 p1 no bias", conv_geom(8, 9, 7, 5, 3, 2, 1, false), 3},
      {"1x1 16x5x5", conv_geom(16, 5, 5, 8, 1, 1, 0, true), 2},
      {"2 groups 8x9x9 k3 p1", conv_geom_ex(8, 9, 9, 12, 2, 3, 3, 1, 1, 1, 1, 1, 1), 4},
      {"depthwise 32x12x12 k3 s2 p1", conv_geom_ex(32, 12, 12, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1), 4},
      {"depthwise x2 4x7x7 k3 p1", conv_geom_ex(4, 7, 7, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1), 3},
      {"dilated 2 16x10x10 k3 p2", conv_geom_ex(16, 10, 10, 8, 1, 3, 3, 1, 1, 2, 2, 2, 2), 3},
      {"rect 3x1 s2x1 p1x0 d1x2 6x9x7", conv_geom_ex(6, 9, 7, 4, 2, 3, 2, 2, 1, 1, 0, 1, 2), 3},
      // MobileNetV2's depthwise layers at the small sizes a 32x32 input reaches.
      {"depthwise 144x8x8 k3 s2 p1", conv_geom_ex(144, 8, 8, 144, 144, 3, 3, 2, 2, 1, 1, 1, 1), 4},
      {"depthwise 576x2x2 k3 p1", conv_geom_ex(576, 2, 2, 576, 576, 3, 3, 1, 1, 1, 1, 1, 1), 4},
      {"depthwise 576x2x2 k3 s2 p1", conv_geom_ex(576, 2, 2, 576, 576, 3, 3, 2, 2, 1, 1, 1, 1), 4},
      {"depthwise 960x1x1 k3 p1", conv_geom_ex(960, 1, 1, 960, 960, 3, 3, 1, 1, 1, 1, 1, 1), 4},
      {"1x1 960->320 at 1x1", conv_geom_ex(960, 1, 1, 320, 1, 1, 1, 1, 1, 0, 0, 1, 1), 4},
  };
  // Algorithms timed (gpu_, the default: the fastest deterministic one of cudnnFind's list) and by
  // cuDNN's heuristics (CudaOptions::benchmark = false); the second backend runs on its own stream,
  // so it is synchronised before the results are read through gpu_.
  CudaOptions heuristic;
  heuristic.benchmark = false;
  auto heuristic_gpu = make_cuda_backend(0, heuristic);
  for (CudaBackend* be : {gpu_.get(), heuristic_gpu.get()}) {
    SCOPED_TRACE(be == gpu_.get() ? "timed algorithms" : "heuristic algorithms");
    std::uint64_t seed = 1;
    for (const auto& c : cases) {
      SCOPED_TRACE(c.name);
      const ConvGeom& g = c.g;
      const auto xn = static_cast<std::size_t>(c.n * g.c * g.h * g.w);
      const auto yn = static_cast<std::size_t>(c.n * g.k * g.oh * g.ow);
      const auto wn = static_cast<std::size_t>(g.k * (g.c / g.groups) * g.r * g.s);
      const auto bn = static_cast<std::size_t>(g.k);
      const auto x = random_vec(xn, ++seed), w = random_vec(wn, ++seed, -0.3f, 0.3f),
                 b = random_vec(bn, ++seed), dy = random_vec(yn, ++seed);
      auto cop = cpu_->conv(g);
      auto gop = be->conv(g);

      std::vector<float> y(yn), dx(xn), dw(wn), db(bn);
      cop->forward(c.n, x.data(), w.data(), g.bias ? b.data() : nullptr, y.data());
      cop->backward(c.n, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                    g.bias ? db.data() : nullptr);

      auto X = up(x), W = up(w), B = up(b), DY = up(dy);
      auto Y = zeros(yn), DX = zeros(xn), DW = zeros(wn), DB = zeros(bn);
      gop->forward(c.n, X.floats(), W.floats(), g.bias ? B.floats() : nullptr, Y.floats());
      gop->backward(c.n, X.floats(), W.floats(), DY.floats(), DX.floats(), DW.floats(),
                    g.bias ? DB.floats() : nullptr);
      be->synchronize();
      expect_close(y, down(Y, yn), 5e-4, 1e-3, "forward y");
      expect_close(dx, down(DX, xn), 5e-4, 1e-3, "backward dx");
      expect_close(dw, down(DW, wn), 5e-4, 1e-3, "backward dw");
      if (g.bias) expect_close(db, down(DB, bn), 5e-4, 1e-3, "backward db");

      // The first layer's backward without an input gradient, and a second batch size (a new plan).
      const std::int64_t n2 = c.n - 1;
      gop->backward(n2, X.floats(), W.floats(), DY.floats(), nullptr, DW.floats(),
                    g.bias ? DB.floats() : nullptr);
      cop->backward(n2, x.data(), w.data(), dy.data(), nullptr, dw.data(),
                    g.bias ? db.data() : nullptr);
      be->synchronize();
      expect_close(dw, down(DW, wn), 5e-4, 1e-3, "backward dw (batch n-1, no dx)");
    }
    EXPECT_LE(be->workspace_bytes(), CudaOptions{}.workspace_limit_bytes);
  }
}

// --- pooling -------------------------------------------------------------------------------------
// Max pooling selects values: forward and backward are exact where windows do not overlap (random
// inputs have no ties).
// Average pooling divides sums of up to 9 values by the count: 1e-6 relative.

PoolGeom pool_geom(PoolKind kind, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                   std::int64_t stride, std::int64_t pad) {
  PoolGeom g;
  g.kind = kind, g.c = c, g.h = h, g.w = w, g.kh = g.kw = k, g.stride_h = g.stride_w = stride,
  g.pad_h = g.pad_w = pad;
  g.oh = (h + 2 * pad - k) / stride + 1;
  g.ow = (w + 2 * pad - k) / stride + 1;
  return g;
}

TEST_F(CudaVsCpu, PoolingForwardBackward) {
  struct Case {
    const char* name;
    PoolGeom g;
    bool exact;
  };
  const Case cases[] = {
      {"max 2x2 s2 6x28x28", pool_geom(PoolKind::max, 6, 28, 28, 2, 2, 0), true},
      {"max 2x2 s2 odd 3x7x5", pool_geom(PoolKind::max, 3, 7, 5, 2, 2, 0), true},
      // Overlapping windows: an input that is the maximum of two windows sums two gradients, in
      // cuDNN's order or oneDNN's (found on an H100: one element 1 ulp apart).
      {"max 3x3 s2 p1 4x9x9", pool_geom(PoolKind::max, 4, 9, 9, 3, 2, 1), false},
      {"avg 2x2 s2 6x28x28", pool_geom(PoolKind::avg, 6, 28, 28, 2, 2, 0), false},
      {"avg 3x3 s1 p1 4x6x6", pool_geom(PoolKind::avg, 4, 6, 6, 3, 1, 1), false},
  };
  const std::int64_t n = 5;
  std::uint64_t seed = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const PoolGeom& g = c.g;
    const auto xn = static_cast<std::size_t>(n * g.c * g.h * g.w);
    const auto yn = static_cast<std::size_t>(n * g.c * g.oh * g.ow);
    const auto x = random_vec(xn, ++seed), dy = random_vec(yn, ++seed);
    auto cop = cpu_->pool(g);
    auto gop = gpu_->pool(g);
    std::vector<float> y(yn), dx(xn);
    cop->forward(n, x.data(), y.data(), true);
    cop->backward(n, dy.data(), dx.data());
    auto X = up(x), DY = up(dy), Y = zeros(yn), DX = zeros(xn);
    gop->forward(n, X.floats(), Y.floats(), true);
    gop->backward(n, DY.floats(), DX.floats());
    if (c.exact) {
      expect_equal(y, down(Y, yn), "forward y");
      expect_equal(dx, down(DX, xn), "backward dx");
    } else {
      expect_close(y, down(Y, yn), 1e-6, 1e-6, "forward y");
      expect_close(dx, down(DX, xn), 1e-6, 1e-6, "backward dx");
    }
    // Inference forward gives the same values.
    auto Y2 = zeros(yn);
    gop->forward(n, X.floats(), Y2.floats(), false);
    expect_equal(down(Y, yn), down(Y2, yn), "inference forward");
  }
}

// --- linear --------------------------------------------------------------------------------------
// cuBLAS SGEMM (no TF32) against oneDNN's inner product: sums of up to 400 products in another
// order: 1e-5 of the largest magnitude plus 1e-4 relative.

TEST_F(CudaVsCpu, LinearForwardBackward) {
  struct Case {
    std::int64_t in, out, n;
    bool bias;
  };
  const Case cases[] = {
      {400, 120, 7, true}, {120, 84, 32, true}, {5, 3, 1, false}, {84, 10, 33, true}};
  std::uint64_t seed = 200;
  for (const auto& c : cases) {
    SCOPED_TRACE("linear " + std::to_string(c.in) + "->" + std::to_string(c.out) + " batch " +
                 std::to_string(c.n));
    LinearGeom g;
    g.in = c.in, g.out = c.out, g.bias = c.bias;
    const auto xn = static_cast<std::size_t>(c.n * c.in),
               yn = static_cast<std::size_t>(c.n * c.out),
               wn = static_cast<std::size_t>(c.in * c.out), bn = static_cast<std::size_t>(c.out);
    const auto x = random_vec(xn, ++seed), w = random_vec(wn, ++seed, -0.2f, 0.2f),
               b = random_vec(bn, ++seed), dy = random_vec(yn, ++seed);
    auto cop = cpu_->linear(g);
    auto gop = gpu_->linear(g);
    std::vector<float> y(yn), dx(xn), dw(wn), db(bn);
    cop->forward(c.n, x.data(), w.data(), c.bias ? b.data() : nullptr, y.data());
    cop->backward(c.n, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                  c.bias ? db.data() : nullptr);
    auto X = up(x), W = up(w), B = up(b), DY = up(dy);
    auto Y = zeros(yn), DX = zeros(xn), DW = zeros(wn), DB = zeros(bn);
    gop->forward(c.n, X.floats(), W.floats(), c.bias ? B.floats() : nullptr, Y.floats());
    gop->backward(c.n, X.floats(), W.floats(), DY.floats(), DX.floats(), DW.floats(),
                  c.bias ? DB.floats() : nullptr);
    expect_close(y, down(Y, yn), 1e-5, 1e-4, "forward y");
    expect_close(dx, down(DX, xn), 1e-5, 1e-4, "backward dx");
    expect_close(dw, down(DW, wn), 1e-5, 1e-4, "backward dw");
    if (c.bias) expect_close(db, down(DB, bn), 1e-5, 1e-4, "backward db");
  }
}

// --- batch norm ----------------------------------------------------------------------------------
// Means and variances over up to 150 values per channel in another order, then normalisation:
// 1e-5 of the largest magnitude plus 1e-4 relative, for outputs, running statistics (PyTorch's
// unbiased running variance on both) and gradients.

TEST_F(CudaVsCpu, BatchNormTrainingInferenceBackward) {
  struct Case {
    const char* name;
    std::int64_t c, h, w, n;
  };
  // One value per channel (N*H*W = 1): cuDNN's unbiased running variance would divide by zero;
  // the CPU keeps the biased one, and so must the GPU.
  const Case cases[] = {{"image 4x5x5", 4, 5, 5, 6},
                        {"features 10", 10, 1, 1, 8},
                        {"one value per channel", 3, 1, 1, 1},
                        {"one image of 1x1", 5, 1, 1, 1}};
  // The backend's own kernels (gpu_, the default) and cuDNN's (CudaOptions::cudnn_batch_norm, kept
  // for A/B timings); the second backend's ops run on its own stream, so it is synchronised before
  // the results are read through gpu_.
  CudaOptions with_cudnn;
  with_cudnn.cudnn_batch_norm = true;
  auto cudnn_gpu = make_cuda_backend(0, with_cudnn);
  for (CudaBackend* be : {gpu_.get(), cudnn_gpu.get()}) {
    SCOPED_TRACE(be == gpu_.get() ? "own kernels" : "cuDNN");
    std::uint64_t seed = 300;
    for (const auto& c : cases) {
      SCOPED_TRACE(c.name);
      BatchNormGeom g;
      g.c = c.c, g.h = c.h, g.w = c.w, g.eps = 1e-5f, g.momentum = 0.1f;
      const auto xn = static_cast<std::size_t>(c.n * c.c * c.h * c.w),
                 cn = static_cast<std::size_t>(c.c);
      const auto x = random_vec(xn, ++seed, -2.0f, 3.0f),
                 gamma = random_vec(cn, ++seed, 0.5f, 1.5f), beta = random_vec(cn, ++seed),
                 dy = random_vec(xn, ++seed);
      std::vector<float> rmean = random_vec(cn, ++seed), rvar = random_vec(cn, ++seed, 0.5f, 2.0f);
      auto cop = cpu_->batch_norm(g);
      auto gop = be->batch_norm(g);
      auto X = up(x), G = up(gamma), BE = up(beta), DY = up(dy), RM = up(rmean), RV = up(rvar);
      auto Y = zeros(xn), DX = zeros(xn), DG = zeros(cn), DB = zeros(cn);

      std::vector<float> y(xn), dx(xn), dg(cn), db(cn);
      cop->forward(c.n, x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), y.data(),
                   true);
      cop->backward(c.n, x.data(), dy.data(), gamma.data(), dx.data(), dg.data(), db.data());
      gop->forward(c.n, X.floats(), G.floats(), BE.floats(), RM.floats(), RV.floats(), Y.floats(),
                   true);
      gop->backward(c.n, X.floats(), DY.floats(), G.floats(), DX.floats(), DG.floats(),
                    DB.floats());
      be->synchronize();
      expect_close(y, down(Y, xn), 1e-5, 1e-4, "training forward y");
      expect_close(rmean, down(RM, cn), 1e-5, 1e-4, "running mean");
      expect_close(rvar, down(RV, cn), 1e-5, 1e-4, "running variance (unbiased)");
      expect_close(dx, down(DX, xn), 1e-5, 1e-4, "backward dx");
      expect_close(dg, down(DG, cn), 1e-5, 1e-4, "backward dgamma");
      expect_close(db, down(DB, cn), 1e-5, 1e-4, "backward dbeta");

      cop->forward(c.n, x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), y.data(),
                   false);
      gop->forward(c.n, X.floats(), G.floats(), BE.floats(), RM.floats(), RV.floats(), Y.floats(),
                   false);
      be->synchronize();
      expect_close(y, down(Y, xn), 1e-5, 1e-4, "inference forward y");
    }
  }
}

// The backend's own batch-norm kernels (the default; CudaOptions::cudnn_batch_norm selects cuDNN)
// on awkward shapes, training forward and backward and inference against the CPU op: a channel
// of one value (the biased variance), h*w % 4 != 0 (no float4), a channel's N*H*W not a multiple
// of the 8192-value chunk and over several chunks, rows misaligned for float4 (the scalar path on
// a shape that would take float4), and large means (x = 1000 + noise: E[x^2] - mean^2 in double
// keeps ~1e-10 of the variance). Tolerances as above: both sum in double, in another order. A
// second run on the same inputs must give the same bits (no atomics: a fixed reduction order).
TEST_F(CudaVsCpu, BatchNormOwnKernelsAwkwardShapes) {
  struct Case {
    const char* name;
    std::int64_t c, h, w, n;
    float lo, hi;
    bool misalign;  // every device tensor starts one float past a 16-byte boundary
  };
  const Case cases[] = {
      {"C=3, N=1, HW=1", 3, 1, 1, 1, -2.0f, 3.0f, false},
      {"N=1, 7x7 (h*w % 4 != 0)", 5, 7, 7, 1, -2.0f, 3.0f, false},
      {"C=3, 1x3, N=5", 3, 1, 3, 5, -2.0f, 3.0f, false},
      {"45x45, 3 chunks, the last short", 2, 45, 45, 12, -2.0f, 3.0f, false},
      {"4 chunks exactly, float4", 2, 32, 32, 32, -2.0f, 3.0f, false},
      {"4 chunks, misaligned rows", 2, 32, 32, 32, -2.0f, 3.0f, true},
      {"x = 1000 + noise, 2 chunks, float4", 3, 64, 64, 3, 999.0f, 1001.0f, false},
      {"x = 1000 + noise, 7x7", 4, 7, 7, 9, 999.0f, 1001.0f, false}};
  std::uint64_t seed = 900;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    BatchNormGeom g;
    g.c = c.c, g.h = c.h, g.w = c.w, g.eps = 1e-5f, g.momentum = 0.1f;
    const auto xn = static_cast<std::size_t>(c.n * c.c * c.h * c.w),
               cn = static_cast<std::size_t>(c.c);
    const auto x = random_vec(xn, ++seed, c.lo, c.hi), gamma = random_vec(cn, ++seed, 0.5f, 1.5f),
               beta = random_vec(cn, ++seed), dy = random_vec(xn, ++seed);
    std::vector<float> rmean = random_vec(cn, ++seed), rvar = random_vec(cn, ++seed, 0.5f, 2.0f);
    const std::size_t off = c.misalign ? 1 : 0;
    // A device tensor `host` at float offset `off` of its buffer.
    auto up_at = [&](const std::vector<float>& host) {
      DeviceBuffer b(gpu_->device_index(), (host.size() + 1) * sizeof(float));
      gpu_->to_device(host.data(), b.floats() + off, host.size() * sizeof(float));
      return b;
    };
    auto down_at = [&](const DeviceBuffer& b, std::size_t n) {
      std::vector<float> h(n);
      gpu_->to_host(b.floats() + off, h.data(), n * sizeof(float));
      return h;
    };
    auto cop = cpu_->batch_norm(g);
    auto gop = gpu_->batch_norm(g);
    const std::vector<float> zx(xn, 0.0f);
    auto X = up_at(x), DY = up_at(dy), Y = up_at(zx), DX = up_at(zx);
    auto G = up(gamma), BE = up(beta), RM = up(rmean), RV = up(rvar);
    auto DG = zeros(cn), DB = zeros(cn);

    std::vector<float> y(xn), dx(xn), dg(cn), db(cn);
    cop->forward(c.n, x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), y.data(),
                 true);
    cop->backward(c.n, x.data(), dy.data(), gamma.data(), dx.data(), dg.data(), db.data());
    auto gpu_step = [&] {
      gop->forward(c.n, X.floats() + off, G.floats(), BE.floats(), RM.floats(), RV.floats(),
                   Y.floats() + off, true);
      gop->backward(c.n, X.floats() + off, DY.floats() + off, G.floats(), DX.floats() + off,
                    DG.floats(), DB.floats());
    };
    gpu_step();
    const auto gy = down_at(Y, xn), gdx = down_at(DX, xn), gdg = down(DG, cn), gdb = down(DB, cn);
    expect_close(y, gy, 1e-5, 1e-4, "training forward y");
    expect_close(rmean, down(RM, cn), 1e-5, 1e-4, "running mean");
    expect_close(rvar, down(RV, cn), 1e-5, 1e-4, "running variance");
    expect_close(dx, gdx, 1e-5, 1e-4, "backward dx");
    expect_close(dg, gdg, 1e-5, 1e-4, "backward dgamma");
    expect_close(db, gdb, 1e-5, 1e-4, "backward dbeta");
    // The same inputs again (the running statistics move on, the batch's do not): the same bits.
    gpu_step();
    expect_equal(gy, down_at(Y, xn), "second run y");
    expect_equal(gdx, down_at(DX, xn), "second run dx");
    expect_equal(gdg, down(DG, cn), "second run dgamma");
    expect_equal(gdb, down(DB, cn), "second run dbeta");

    // Inference with the running statistics: the GPU's (two training steps) given to the CPU op.
    rmean = down(RM, cn);
    rvar = down(RV, cn);
    cop->forward(c.n, x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), y.data(),
                 false);
    gop->forward(c.n, X.floats() + off, G.floats(), BE.floats(), RM.floats(), RV.floats(),
                 Y.floats() + off, false);
    expect_close(y, down_at(Y, xn), 1e-5, 1e-4, "inference forward y");
  }
}

// Sync batch norm's split passes (forward_sums/apply, backward_sums/apply) for two "ranks" of one
// process: each rank's op instance on its part of the batch, the sums added on the host in place
// of the all-reduce. The GPU's kernels against the CPU's loops (same tolerance as above), with
// unequal parts and with an empty one.
TEST_F(CudaVsCpu, SyncBatchNormSplitPasses) {
  const std::int64_t c = 3, h = 4, w = 5;
  for (const auto& parts : {std::vector<std::int64_t>{2, 5}, std::vector<std::int64_t>{4, 0}}) {
    SCOPED_TRACE("parts " + std::to_string(parts[0]) + "+" + std::to_string(parts[1]));
    BatchNormGeom g;
    g.c = c, g.h = h, g.w = w, g.eps = 1e-5f, g.momentum = 0.1f;
    const auto per = static_cast<std::size_t>(c * h * w), cn = static_cast<std::size_t>(c);
    const auto gamma = random_vec(cn, 401, 0.5f, 1.5f), beta = random_vec(cn, 402);
    auto G = up(gamma), BE = up(beta);
    struct Rank {
      std::int64_t n;
      std::vector<float> x, dy, y, dx, rm, rv, dg, db;
      std::unique_ptr<BatchNormOp> cop, gop;
      DeviceBuffer X, DY, Y, DX, RM, RV, DG, DB;
    };
    std::vector<Rank> ranks(2);
    for (std::size_t r = 0; r < 2; ++r) {
      Rank& k = ranks[r];
      k.n = parts[r];
      const auto xn = static_cast<std::size_t>(k.n) * per;
      k.x = random_vec(xn, 410 + r, -2.0f, 3.0f);
      k.dy = random_vec(xn, 420 + r);
      k.y.assign(xn, 0.0f);
      k.dx.assign(xn, 0.0f);
      k.rm = random_vec(cn, 430, -0.2f, 0.2f);  // replicas: the same on both
      k.rv = random_vec(cn, 431, 0.5f, 2.0f);
      k.dg.assign(cn, 0.0f);
      k.db.assign(cn, 0.0f);
      k.cop = cpu_->batch_norm(g);
      k.gop = gpu_->batch_norm(g);
      k.X = up(k.x), k.DY = up(k.dy), k.Y = zeros(xn), k.DX = zeros(xn);
      k.RM = up(k.rm), k.RV = up(k.rv), k.DG = zeros(cn), k.DB = zeros(cn);
    }
    // The all-reduce: every rank's sums added, in place, on the host.
    const auto sum_cpu = [](std::vector<std::span<double>> s) {
      for (std::size_t i = 0; i < s[0].size(); ++i) s[0][i] = s[1][i] = s[0][i] + s[1][i];
    };
    const auto sum_gpu = [&](std::vector<std::span<double>> s) {
      std::vector<double> a(s[0].size()), b(s[1].size());
      gpu_->to_host(s[0].data(), a.data(), a.size() * sizeof(double));
      gpu_->to_host(s[1].data(), b.data(), b.size() * sizeof(double));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
      gpu_->to_device(a.data(), s[0].data(), a.size() * sizeof(double));
      gpu_->to_device(a.data(), s[1].data(), a.size() * sizeof(double));
    };
    const auto ptr = [](std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    const auto dptr = [](const Rank& k, const DeviceBuffer& b) {
      return k.n == 0 ? nullptr : b.floats();
    };
    std::vector<std::span<double>> cs, gs;
    for (auto& k : ranks) {
      cs.push_back(k.cop->forward_sums(k.n, ptr(k.x)));
      gs.push_back(k.gop->forward_sums(k.n, dptr(k, k.X)));
    }
    sum_cpu(cs);
    sum_gpu(gs);
    cs.clear();
    gs.clear();
    for (auto& k : ranks) {
      k.cop->forward_apply(k.n, ptr(k.x), gamma.data(), beta.data(), k.rm.data(), k.rv.data(),
                           ptr(k.y));
      k.gop->forward_apply(k.n, dptr(k, k.X), G.floats(), BE.floats(), k.RM.floats(), k.RV.floats(),
                           dptr(k, k.Y));
      cs.push_back(k.cop->backward_sums(k.n, ptr(k.x), ptr(k.dy), k.dg.data(), k.db.data()));
      gs.push_back(
          k.gop->backward_sums(k.n, dptr(k, k.X), dptr(k, k.DY), k.DG.floats(), k.DB.floats()));
    }
    sum_cpu(cs);
    sum_gpu(gs);
    for (auto& k : ranks) {
      k.cop->backward_apply(k.n, ptr(k.x), ptr(k.dy), gamma.data(), ptr(k.dx));
      k.gop->backward_apply(k.n, dptr(k, k.X), dptr(k, k.DY), G.floats(), dptr(k, k.DX));
      const auto xn = k.y.size();
      expect_close(k.y, down(k.Y, xn), 1e-5, 1e-4, "forward y");
      expect_close(k.dx, down(k.DX, xn), 1e-5, 1e-4, "backward dx");
      expect_close(k.rm, down(k.RM, cn), 1e-5, 1e-4, "running mean");
      expect_close(k.rv, down(k.RV, cn), 1e-5, 1e-4, "running variance");
      expect_close(k.dg, down(k.DG, cn), 1e-5, 1e-4, "this rank's dgamma");
      expect_close(k.db, down(k.DB, cn), 1e-5, 1e-4, "this rank's dbeta");
    }
  }
}

// --- element-wise --------------------------------------------------------------------------------

// The relu family are the same selects on both backends (bitwise, in place too); gelu and silu
// evaluate erf and exp with oneDNN's polynomials on the CPU and CUDA's erff/expf: both within
// 4e-7 of the exact values (ActivationValues in layer_gradcheck_test.cpp), so 1e-6 of the largest
// value plus 2e-6 relative.
TEST_F(CudaVsCpu, Activations) {
  const std::size_t count = 10007;
  const auto m = static_cast<std::int64_t>(count);
  const auto x = random_vec(count, 410, -8.0f, 10.0f), dy = random_vec(count, 411);
  const struct {
    Activation kind;
    const char* name;
  } kinds[] = {{Activation::relu, "relu"},
               {Activation::relu6, "relu6"},
               {Activation::leaky_relu, "leaky_relu"},
               {Activation::gelu, "gelu"},
               {Activation::silu, "silu"},
               {Activation::hardswish, "hardswish"}};
  const float slope = 0.1f;
  for (const auto& k : kinds) {
    SCOPED_TRACE(k.name);
    std::vector<float> y(count), dx(count);
    cpu_->activation_forward(k.kind, slope, m, x.data(), y.data());
    cpu_->activation_backward(k.kind, slope, m, x.data(), y.data(), dy.data(), dx.data());
    auto X = up(x), DY = up(dy), Y = zeros(count), DX = zeros(count);
    gpu_->activation_forward(k.kind, slope, m, X.floats(), Y.floats());
    gpu_->activation_backward(k.kind, slope, m, X.floats(), Y.floats(), DY.floats(), DX.floats());
    if (backward_uses_output(k.kind)) {
      expect_equal(y, down(Y, count), "forward");
      expect_equal(dx, down(DX, count), "backward");
      // In place: y over x, dx over dy, reading only y.
      gpu_->activation_forward(k.kind, slope, m, X.floats(), X.floats());
      gpu_->activation_backward(k.kind, slope, m, nullptr, X.floats(), DY.floats(), DY.floats());
      expect_equal(y, down(X, count), "forward in place");
      expect_equal(dx, down(DY, count), "backward in place");
    } else {
      expect_close(y, down(Y, count), 1e-6, 2e-6, "forward");
      expect_close(dx, down(DX, count), 1e-6, 2e-6, "backward");
    }
  }
}

TEST_F(CudaVsCpu, ReluDropoutMulExact) {
  const std::size_t count = 10007;  // not a multiple of any block size
  const auto x = random_vec(count, 400), dy = random_vec(count, 401);
  auto X = up(x), DY = up(dy), Y = zeros(count), DX = zeros(count);
  std::vector<float> y(count), dx(count);
  // ReLU: max(x, 0) and its mask are exact.
  cpu_->relu_forward(static_cast<std::int64_t>(count), x.data(), y.data());
  cpu_->relu_backward(static_cast<std::int64_t>(count), y.data(), dy.data(), dx.data());
  gpu_->relu_forward(static_cast<std::int64_t>(count), X.floats(), Y.floats());
  gpu_->relu_backward(static_cast<std::int64_t>(count), Y.floats(), DY.floats(), DX.floats());
  expect_equal(y, down(Y, count), "relu forward");
  expect_equal(dx, down(DX, count), "relu backward");

  // Dropout: the masks are a pure function of (seed, sample id, element) and must be identical,
  // with host and with device sample ids; y = x * mask is one rounding on both.
  const std::int64_t n = 4, per = 2500;
  const std::vector<std::int64_t> ids = {3, 17, 5, 1000003};
  const auto xs = random_vec(static_cast<std::size_t>(n * per), 402);
  auto XS = up(xs), M = zeros(xs.size()), YS = zeros(xs.size());
  std::vector<float> mask(xs.size()), ys(xs.size());
  for (float p : {0.5f, 0.1f}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    cpu_->dropout_forward(n, per, p, 99, ids.data(), xs.data(), mask.data(), ys.data());
    gpu_->dropout_forward(n, per, p, 99, ids.data(), XS.floats(), M.floats(), YS.floats());
    expect_equal(mask, down(M, mask.size()), "dropout mask (host sample ids)");
    expect_equal(ys, down(YS, ys.size()), "dropout y");
    DeviceBuffer dev_ids(gpu_->device_index(), ids.size() * sizeof(std::int64_t));
    gpu_->to_device(ids.data(), dev_ids.data(), ids.size() * sizeof(std::int64_t));
    gpu_->fill(static_cast<std::int64_t>(mask.size()), 0.0f, M.floats());
    gpu_->dropout_forward(n, per, p, 99, dev_ids.as<std::int64_t>(), XS.floats(), M.floats(),
                          YS.floats());
    expect_equal(mask, down(M, mask.size()), "dropout mask (device sample ids)");
  }
  // Two dropout layers of one micro-batch pass the same host ids: one upload serves both, and the
  // next micro-batch's ids (other values, the same array) are uploaded again, not taken stale.
  std::vector<std::int64_t> batch_ids = {7, 8, 9, 10};
  const std::int64_t before = gpu_->sample_id_uploads();
  for (int layer = 0; layer < 3; ++layer) {
    cpu_->dropout_forward(n, per, 0.5f, 11 + layer, batch_ids.data(), xs.data(), mask.data(),
                          ys.data());
    gpu_->dropout_forward(n, per, 0.5f, 11 + layer, batch_ids.data(), XS.floats(), M.floats(),
                          YS.floats());
    expect_equal(mask, down(M, mask.size()), "dropout mask, layer " + std::to_string(layer));
  }
  EXPECT_EQ(gpu_->sample_id_uploads() - before, 1);
  for (auto& id : batch_ids) id += 4;  // the next micro-batch, in the same host array
  cpu_->dropout_forward(n, per, 0.5f, 11, batch_ids.data(), xs.data(), mask.data(), ys.data());
  gpu_->dropout_forward(n, per, 0.5f, 11, batch_ids.data(), XS.floats(), M.floats(), YS.floats());
  expect_equal(mask, down(M, mask.size()), "dropout mask, next micro-batch");
  EXPECT_EQ(gpu_->sample_id_uploads() - before, 2);

  std::vector<float> prod(xs.size());
  cpu_->mul(static_cast<std::int64_t>(xs.size()), xs.data(), mask.data(), prod.data());
  gpu_->mul(static_cast<std::int64_t>(xs.size()), XS.floats(), M.floats(), YS.floats());
  expect_equal(prod, down(YS, xs.size()), "mul");
}

TEST_F(CudaVsCpu, FillCopyAddExact) {
  const std::size_t count = 3001;
  const auto a = random_vec(count, 500), b = random_vec(count, 501);
  auto A = up(a), B = up(b);
  gpu_->add(static_cast<std::int64_t>(count), A.floats(), B.floats());
  std::vector<float> sum = b;
  cpu_->add(static_cast<std::int64_t>(count), a.data(), sum.data());
  expect_equal(sum, down(B, count), "add");
  gpu_->copy(static_cast<std::int64_t>(count), A.floats(), B.floats());
  expect_equal(a, down(B, count), "copy");
  gpu_->fill(static_cast<std::int64_t>(count), 0.25f, B.floats());
  expect_equal(std::vector<float>(count, 0.25f), down(B, count), "fill 0.25");
  gpu_->fill(static_cast<std::int64_t>(count), 0.0f, B.floats());
  expect_equal(std::vector<float>(count, 0.0f), down(B, count), "fill 0");
}

// The moving average's lerp (both of torch's forms) and test-time augmentation's image views: the
// same expressions (built with --fmad=false), so bit for bit.
TEST_F(CudaVsCpu, LerpAndImageViewsExact) {
  const std::size_t count = 3001;
  const auto x = random_vec(count, 502), y = random_vec(count, 503);
  for (const float weight : {0.05f, 0.5f, 0.93f}) {
    auto X = up(x), Y = up(y);
    gpu_->lerp(static_cast<std::int64_t>(count), X.floats(), weight, Y.floats());
    std::vector<float> want = y;
    cpu_->lerp(static_cast<std::int64_t>(count), x.data(), weight, want.data());
    expect_equal(want, down(Y, count), "lerp " + std::to_string(weight));
  }
  const std::int64_t n = 3, c = 3, h = 9, w = 11;
  const auto img = random_vec(static_cast<std::size_t>(n * c * h * w), 504);
  auto I = up(img);
  auto V = zeros(img.size());
  for (const auto& [dy, dx, flip] : {std::tuple{0, 0, true}, std::tuple{-1, -1, false},
                                     std::tuple{2, 2, true}, std::tuple{-3, 4, true}}) {
    gpu_->image_view(n, c, h, w, dy, dx, flip, I.floats(), V.floats());
    std::vector<float> want(img.size());
    cpu_->image_view(n, c, h, w, dy, dx, flip, img.data(), want.data());
    expect_equal(
        want, down(V, img.size()),
        "image_view " + std::to_string(dy) + " " + std::to_string(dx) + " " + std::to_string(flip));
  }
}

// --- loss ----------------------------------------------------------------------------------------
// cuDNN's float log-softmax vs the CPU's double log-sum-exp: the summed loss agrees to 1e-5
// relative, the gradient (p - target) * scale to 1e-6 of its largest magnitude; argmax counts are
// exact.

TEST_F(CudaVsCpu, SoftmaxCrossEntropy) {
  for (const auto& [n, classes] :
       {std::pair<std::int64_t, std::int64_t>{33, 10}, {5, 100}, {1, 2}}) {
    for (float smoothing : {0.0f, 0.1f}) {
      SCOPED_TRACE("n " + std::to_string(n) + " classes " + std::to_string(classes) +
                   " smoothing " + std::to_string(smoothing));
      const auto cnt = static_cast<std::size_t>(n * classes);
      const auto logits = random_vec(cnt, 600 + static_cast<std::uint64_t>(n), -4.0f, 4.0f);
      std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
      CounterRng rng(5);
      for (auto& l : labels)
        l = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint64_t>(classes)));
      const float scale = 1.0f / static_cast<float>(n);
      std::vector<float> d(cnt);
      const auto rc =
          cpu_->softmax_xent(n, classes, logits.data(), labels.data(), smoothing, scale, d.data());
      auto L = up(logits), D = zeros(cnt);
      const auto rg =
          gpu_->softmax_xent(n, classes, L.floats(), labels.data(), smoothing, scale, D.floats());
      EXPECT_NEAR(rg.loss_sum, rc.loss_sum, 1e-5 * std::abs(rc.loss_sum) + 1e-6);
      EXPECT_EQ(rg.correct, rc.correct);
      expect_close(d, down(D, cnt), 1e-6, 1e-5, "dlogits");

      // Deferred: two accumulations, one read.
      gpu_->softmax_xent_accumulate(n, classes, L.floats(), labels.data(), smoothing, scale,
                                    nullptr);
      gpu_->softmax_xent_accumulate(n, classes, L.floats(), labels.data(), smoothing, scale,
                                    D.floats());
      const auto acc = gpu_->take_loss();
      EXPECT_NEAR(acc.loss_sum, 2 * rc.loss_sum, 2e-5 * std::abs(rc.loss_sum) + 1e-6);
      EXPECT_EQ(acc.correct, 2 * rc.correct);
      EXPECT_EQ(gpu_->take_loss().loss_sum, 0.0);  // reset
    }
  }
}

TEST_F(CudaVsCpu, SoftmaxCrossEntropyRejectsBadLabels) {
  const std::vector<float> logits(20, 0.5f);
  const std::vector<std::int32_t> labels = {0, 1, 10, 3};  // 10 is out of range for 5 classes
  auto L = up(logits);
  EXPECT_THROW(gpu_->softmax_xent(4, 5, L.floats(), labels.data(), 0.0f, 1.0f, nullptr), DataError);
}

// --- optimizers ----------------------------------------------------------------------------------
// The kernels are the CPU loops' expressions in the same order, built with --fmad=false: the
// results should be bit-identical; 2 ulp are allowed in case the host compiler contracted the CPU
// loop into FMAs (-ffp-contract on an FMA-capable -march).

void expect_ulps(const std::vector<float>& cpu, const std::vector<float>& gpu,
                 const std::string& what) {
  expect_close(cpu, gpu, 0.0, 2.5e-7, what);
}

TEST_F(CudaVsCpu, SgdAndAdamUpdates) {
  const std::size_t count = 5003;
  const auto w0 = random_vec(count, 700), g = random_vec(count, 701), m0 = random_vec(count, 702),
             v0 = random_vec(count, 703, 0.0f, 0.01f);
  const Backend::SgdHyper sgds[] = {{0.1f, 0.0f, 0.0f, false},
                                    {0.05f, 0.0f, 5e-4f, false},
                                    {0.05f, 0.9f, 5e-4f, false},
                                    {0.05f, 0.9f, 1e-4f, true}};
  for (const auto& h : sgds) {
    SCOPED_TRACE("sgd lr " + std::to_string(h.lr) + " momentum " + std::to_string(h.momentum) +
                 (h.nesterov ? " nesterov" : ""));
    std::vector<float> w = w0, m = m0;
    auto W = up(w0), G = up(g), M = up(m0);
    for (int step = 0; step < 3; ++step) {
      cpu_->sgd_step(static_cast<std::int64_t>(count), h, w.data(), g.data(), m.data());
      gpu_->sgd_step(static_cast<std::int64_t>(count), h, W.floats(), G.floats(), M.floats());
    }
    expect_ulps(w, down(W, count), "weights");
    if (h.momentum != 0.0f) expect_ulps(m, down(M, count), "momentum");
  }
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "adamw" : "adam");
    Backend::AdamHyper h;
    h.lr = 1e-3f, h.weight_decay = 0.01f, h.decoupled = decoupled;
    std::vector<float> w = w0, m = m0, v = v0;
    auto W = up(w0), G = up(g), M = up(m0), V = up(v0);
    for (std::int64_t step = 1; step <= 3; ++step) {
      h.step = step;
      cpu_->adam_step(static_cast<std::int64_t>(count), h, w.data(), g.data(), m.data(), v.data());
      gpu_->adam_step(static_cast<std::int64_t>(count), h, W.floats(), G.floats(), M.floats(),
                      V.floats());
    }
    expect_ulps(w, down(W, count), "weights");
    expect_ulps(m, down(M, count), "first moment");
    expect_ulps(v, down(V, count), "second moment");
  }
}

// --- the backend object --------------------------------------------------------------------------

TEST_F(CudaVsCpu, BackendBasicsAndUploads) {
  EXPECT_EQ(gpu_->device(), Device::cuda);
  EXPECT_NE(gpu_->name().find("cuda:0"), std::string::npos) << gpu_->name();
  EXPECT_FALSE(gpu_->device_info().uuid.empty());
  EXPECT_NE(gpu_->compute_stream(), nullptr);
  // A device that does not exist.
  EXPECT_THROW(make_cuda_backend(cuda_device_count()), SystemError);

  // Pinned upload on the copy stream, ordered before compute by the event.
  const std::size_t count = 1 << 16;
  PinnedBuffer pinned(gpu_->device_index(), count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i) pinned.as<float>()[i] = static_cast<float>(i % 1000);
  DeviceBuffer dev(gpu_->device_index(), count * sizeof(float)),
      out(gpu_->device_index(), count * sizeof(float));
  using S = DeviceQueue::Stream;
  const auto mark = gpu_->new_event(false), uploaded = gpu_->new_event(false);
  const auto t0 = gpu_->new_event(true), t1 = gpu_->new_event(true);
  gpu_->record(mark, S::compute);
  gpu_->stream_waits(S::copy, mark);
  gpu_->copy_to_device_async(pinned.data(), dev.data(), count * sizeof(float));
  gpu_->record(uploaded, S::copy);
  gpu_->stream_waits(S::compute, uploaded);
  gpu_->record(t0, S::compute);
  gpu_->copy(static_cast<std::int64_t>(count), dev.floats(), out.floats());
  gpu_->record(t1, S::compute);
  gpu_->host_waits(t1);
  EXPECT_TRUE(gpu_->finished(uploaded));
  EXPECT_TRUE(gpu_->finished(t1));
  EXPECT_GE(gpu_->elapsed_s(t0, t1), 0.0);
  EXPECT_LT(gpu_->elapsed_s(t0, t1), 1.0);
  // Memory from the queue: pinned and device, zero-filled.
  const auto ph = gpu_->pinned_bytes(64), dh = gpu_->device_bytes(64);
  EXPECT_EQ(static_cast<const unsigned char*>(ph.get())[63], 0);
  EXPECT_THROW(gpu_->record(1 << 20, S::compute), Error);
  const auto back = down(out, count);
  for (std::size_t i = 0; i < count; i += 997)
    ASSERT_EQ(back[i], static_cast<float>(i % 1000)) << i;
}

// --- dynamic loss scaling: unscale + overflow check ----------------------------------------------
// Multiplying by a power of two is exact: the same bits as the CPU. Any inf or NaN is reported.
TEST_F(CudaVsCpu, UnscaleCheckMatchesCpuAndFindsOverflow) {
  auto g = random_vec(100003, 901, -1e4f, 1e4f);
  auto G = up(g);
  EXPECT_TRUE(gpu_->unscale_check(static_cast<std::int64_t>(g.size()), G.floats(), 0.125f));
  EXPECT_TRUE(cpu_->unscale_check(static_cast<std::int64_t>(g.size()), g.data(), 0.125f));
  expect_equal(g, down(G, g.size()), "unscaled gradients");
  for (float bad :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    g[77777] = bad;
    auto B = up(g);
    EXPECT_FALSE(gpu_->unscale_check(static_cast<std::int64_t>(g.size()), B.floats(), 1.0f));
    EXPECT_FALSE(cpu_->unscale_check(static_cast<std::int64_t>(g.size()), g.data(), 1.0f));
    g[77777] = 0.0f;
  }
}

// The flag form: the device skips the guarded optimizer step itself, and the host reads the flag
// later; an update given a clear flag matches the CPU's.
TEST_F(CudaVsCpu, OverflowFlagSkipsTheStepOnTheDevice) {
  const std::size_t n = 10007;
  auto w = random_vec(n, 910), m = random_vec(n, 911), g = random_vec(n, 912);
  auto W = up(w), M = up(m), G = up(g);
  g[5000] = std::numeric_limits<float>::infinity();
  auto B = up(g);
  Backend::SgdHyper h;
  h.lr = 0.1f;
  h.momentum = 0.9f;
  h.skip_if = gpu_->unscale_flag(static_cast<std::int64_t>(n), B.floats(), 0.5f, 3);
  gpu_->sgd_step(static_cast<std::int64_t>(n), h, W.floats(), B.floats(), M.floats());
  Backend::AdamHyper a;
  a.skip_if = h.skip_if;
  auto V = zeros(n);
  gpu_->adam_step(static_cast<std::int64_t>(n), a, W.floats(), B.floats(), M.floats(), V.floats());
  EXPECT_TRUE(gpu_->overflow_seen(3));
  expect_equal(w, down(W, n), "weights after a skipped step");
  expect_equal(m, down(M, n), "momentum after a skipped step");
  // A finite gradient on another slot: applied, as on the CPU.
  g[5000] = 0.25f;
  auto F = up(g);
  h.skip_if = gpu_->unscale_flag(static_cast<std::int64_t>(n), F.floats(), 0.5f, 0);
  gpu_->sgd_step(static_cast<std::int64_t>(n), h, W.floats(), F.floats(), M.floats());
  EXPECT_FALSE(gpu_->overflow_seen(0));
  EXPECT_TRUE(gpu_->overflow_seen(3));
  Backend::SgdHyper hc = h;
  hc.skip_if = cpu_->unscale_flag(static_cast<std::int64_t>(n), g.data(), 0.5f, 0);
  cpu_->sgd_step(static_cast<std::int64_t>(n), hc, w.data(), g.data(), m.data());
  expect_close(w, down(W, n), 1e-6, 1e-6, "weights after an applied step");
}

// --- reduced precision ---------------------------------------------------------------------------
// Convolutions and linear layers with bf16/fp16 inputs and weights, fp32 accumulation: each input
// is rounded once (relative error 2^-9 for bf16, 2^-12 for fp16), so a sum of K products of random
// sign is off by ~sqrt(K) such errors - well under 2e-2 (bf16) and 3e-3 (fp16) of the tensor's
// largest magnitude. A wrong layout or conversion is off by O(1).
TEST(CudaReducedPrecision, ConvolutionAndLinearTrackFp32) {
  DDP_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  for (const Precision prec : {Precision::fp16, Precision::bf16}) {
    const bool bf16 = prec == Precision::bf16;
    SCOPED_TRACE(bf16 ? "bf16" : "fp16");
    if (bf16 && cuda_device_info(0).cc_major < 8) {
      EXPECT_THROW(
          {
            CudaOptions o;
            o.precision = prec;
            (void)make_cuda_backend(0, o);
          },
          ConfigError);
      continue;
    }
    CudaOptions o;
    o.precision = prec;
    auto gpu = make_cuda_backend(0, o);
    const double tol = bf16 ? 2e-2 : 3e-3;
    auto up = [&](const std::vector<float>& h) {
      DeviceBuffer b(gpu->device_index(), std::max<std::size_t>(h.size(), 1) * sizeof(float));
      gpu->to_device(h.data(), b.data(), h.size() * sizeof(float));
      return b;
    };
    auto down = [&](const DeviceBuffer& b, std::size_t n) {
      std::vector<float> h(n);
      gpu->to_host(b.data(), h.data(), n * sizeof(float));
      return h;
    };
    std::uint64_t seed = 500;
    for (const ConvGeom& g :
         {conv_geom(3, 32, 32, 6, 5, 1, 0, true), conv_geom(32, 16, 16, 64, 3, 1, 1, true)}) {
      const std::int64_t n = 4;
      const auto xn = static_cast<std::size_t>(n * g.c * g.h * g.w);
      const auto yn = static_cast<std::size_t>(n * g.k * g.oh * g.ow);
      const auto wn = static_cast<std::size_t>(g.k * g.c * g.r * g.s);
      const auto bn = static_cast<std::size_t>(g.k);
      const auto x = random_vec(xn, ++seed), w = random_vec(wn, ++seed, -0.3f, 0.3f),
                 b = random_vec(bn, ++seed), dy = random_vec(yn, ++seed);
      std::vector<float> y(yn), dx(xn), dw(wn), db(bn);
      auto cop = cpu->conv(g);
      cop->forward(n, x.data(), w.data(), b.data(), y.data());
      cop->backward(n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
      auto gop = gpu->conv(g);
      auto X = up(x), W = up(w), B = up(b), DY = up(dy), Y = up(y), DX = up(dx), DW = up(dw),
           DB = up(db);
      gop->forward(n, X.floats(), W.floats(), B.floats(), Y.floats());
      gop->backward(n, X.floats(), W.floats(), DY.floats(), DX.floats(), DW.floats(), DB.floats());
      expect_close(y, down(Y, yn), tol, 0.0, "conv forward y");
      expect_close(dx, down(DX, xn), tol, 0.0, "conv backward dx");
      expect_close(dw, down(DW, wn), tol, 0.0, "conv backward dw");
      expect_close(db, down(DB, bn), 1e-5, 1e-4, "conv backward db (fp32)");
    }
    LinearGeom lg;
    lg.in = 400, lg.out = 120;
    const std::int64_t n = 33;
    const auto x = random_vec(static_cast<std::size_t>(n * lg.in), ++seed),
               w = random_vec(static_cast<std::size_t>(lg.in * lg.out), ++seed, -0.2f, 0.2f),
               b = random_vec(static_cast<std::size_t>(lg.out), ++seed),
               dy = random_vec(static_cast<std::size_t>(n * lg.out), ++seed);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
    auto cop = cpu->linear(lg);
    cop->forward(n, x.data(), w.data(), b.data(), y.data());
    cop->backward(n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    auto gop = gpu->linear(lg);
    auto X = up(x), W = up(w), B = up(b), DY = up(dy), Y = up(y), DX = up(dx), DW = up(dw),
         DB = up(db);
    gop->forward(n, X.floats(), W.floats(), B.floats(), Y.floats());
    gop->backward(n, X.floats(), W.floats(), DY.floats(), DX.floats(), DW.floats(), DB.floats());
    expect_close(y, down(Y, y.size()), tol, 0.0, "linear forward y");
    expect_close(dx, down(DX, dx.size()), tol, 0.0, "linear backward dx");
    expect_close(dw, down(DW, dw.size()), tol, 0.0, "linear backward dw");
    expect_close(db, down(DB, db.size()), 1e-5, 1e-4, "linear backward db (fp32)");
  }
}

// An allocation the GPU cannot satisfy is a SystemError, and the backend goes on working.
TEST_F(CudaVsCpu, FailedAllocationIsAnErrorAndTheBackendGoesOn) {
  EXPECT_THROW(DeviceBuffer(gpu_->device_index(), std::size_t{1} << 52), SystemError);
  auto X = up(random_vec(1000, 5));
  EXPECT_EQ(down(X, 1000), random_vec(1000, 5));
}

// --- availability: runs with or without a GPU ----------------------------------------------------

TEST(CudaAvailability, UnusableDeviceIsAClearErrorNotACrash) {
  const std::string why = cuda_unavailable_reason();
  if (why.empty()) {
    EXPECT_GT(cuda_device_count(), 0);
    auto be = make_cuda_backend(0);
    EXPECT_EQ(be->device(), Device::cuda);
    return;
  }
  // No usable GPU (this is what CI checks): a SystemError that carries the reason.
  try {
    (void)make_cuda_backend(0);
    FAIL() << "make_cuda_backend succeeded although: " << why;
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
  EXPECT_THROW(DeviceBuffer(0, 16), SystemError);
}

TEST(CudaAvailability, VersionsNameTheLibraries) {
  const std::string v = cuda_versions();
  if (!cuda_built()) {
    EXPECT_TRUE(v.empty()) << v;
    // The plugin was not found or did not load (ctest names it in DDP_CUDA_PLUGIN): the reason
    // says which file and why.
    EXPECT_NE(cuda_unavailable_reason().find("libddp_cuda.so"), std::string::npos)
        << cuda_unavailable_reason();
    return;
  }
  // The versions are read from the libraries, no GPU needed.
  for (const char* lib : {"CUDA runtime", "cuDNN", "cuBLAS", "NCCL"})
    EXPECT_NE(v.find(lib), std::string::npos) << v;
}

}  // namespace
}  // namespace ddp::backend
