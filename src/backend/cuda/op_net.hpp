#pragma once
// A minimal sequential network over the Backend interface whose memory lives in the backend's
// space: what nn::Model does (one flat parameter and one flat gradient buffer with 16-float
// alignment, PyTorch-default initialisation drawn like Model::init_parameters, forward and backward
// through the backend's ops, a per-layer "gradients ready" hook), for the CUDA tests and
// bench/gpu_bench. nn::Model allocates host tensors (Tensor::zeros), so until it can allocate on
// the device this is how LeNet and the VGG net train on a GPU. Header-only, public headers only,
// no CUDA headers: the unit tests (built by the host compiler) include it too.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/rng.hpp"

namespace ddp::backend::opnet {

// Where a net's buffers live.
class Memory {
 public:
  virtual ~Memory() = default;
  // `count` zero floats, alive as long as this Memory.
  virtual float* alloc(std::size_t count) = 0;
  virtual void upload(const float* host, float* dst, std::size_t count) = 0;
  virtual void download(const float* src, float* host, std::size_t count) = 0;
};

class HostMemory final : public Memory {
 public:
  float* alloc(std::size_t count) override {
    blocks_.push_back(std::make_unique<float[]>(count == 0 ? 1 : count));
    return blocks_.back().get();
  }
  void upload(const float* host, float* dst, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) dst[i] = host[i];
  }
  void download(const float* src, float* host, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) host[i] = src[i];
  }

 private:
  std::vector<std::unique_ptr<float[]>> blocks_;
};

class CudaMemory final : public Memory {
 public:
  explicit CudaMemory(CudaBackend& be) : be_(be) {}
  float* alloc(std::size_t count) override {
    blocks_.emplace_back(be_.device_index(), (count == 0 ? 1 : count) * sizeof(float));
    return blocks_.back().floats();
  }
  void upload(const float* host, float* dst, std::size_t count) override {
    be_.to_device(host, dst, count * sizeof(float));
  }
  void download(const float* src, float* host, std::size_t count) override {
    be_.to_host(src, host, count * sizeof(float));
  }

 private:
  CudaBackend& be_;
  std::vector<DeviceBuffer> blocks_;
};

enum class Kind { conv, relu, maxpool, avgpool, flatten, linear, batchnorm, dropout };

struct LayerDesc {
  Kind kind = Kind::relu;
  std::int64_t out = 0;     // conv: output channels; linear: output features
  std::int64_t kernel = 0;  // conv, pooling
  std::int64_t stride = 0;  // 0: 1 for conv, = kernel for pooling
  std::int64_t pad = 0;
  float p = 0.5f;  // dropout
  bool bias = true;
};

inline LayerDesc conv(std::int64_t out, std::int64_t k, std::int64_t pad = 0) {
  return {Kind::conv, out, k, 1, pad};
}
inline LayerDesc linear(std::int64_t out) {
  return {Kind::linear, out};
}
inline LayerDesc maxpool(std::int64_t k) {
  return {Kind::maxpool, 0, k, k};
}
inline LayerDesc plain(Kind k) {
  return {k};
}

// The presets of src/app/presets.cpp (lenet, vgg_small[_bn]).
inline std::vector<LayerDesc> lenet() {
  return {conv(6, 5),        plain(Kind::relu), maxpool(2),           conv(16, 5),
          plain(Kind::relu), maxpool(2),        plain(Kind::flatten), linear(120),
          plain(Kind::relu), linear(84),        plain(Kind::relu),    linear(10)};
}
inline std::vector<LayerDesc> vgg_small(bool batchnorm, float dropout = 0.0f) {
  std::vector<LayerDesc> l;
  for (std::int64_t ch : {32, 64}) {
    l.push_back(conv(ch, 3, 1));
    if (batchnorm) l.push_back(plain(Kind::batchnorm));
    l.push_back(plain(Kind::relu));
    l.push_back(maxpool(2));
  }
  l.push_back(plain(Kind::flatten));
  l.push_back(linear(512));
  l.push_back(plain(Kind::relu));
  if (dropout > 0.0f) l.push_back({Kind::dropout, 0, 0, 0, 0, dropout});
  l.push_back(linear(10));
  return l;
}

class Net {
 public:
  // input: one sample's channels, height, width. Buffers for batches of up to max_batch.
  Net(Backend& be, Memory& mem, std::vector<LayerDesc> descs, std::int64_t c, std::int64_t h,
      std::int64_t w, std::int64_t classes, std::int64_t max_batch)
      : be_(be), mem_(mem), max_batch_(max_batch), classes_(classes) {
    std::int64_t C = c, H = h, W = w;
    std::size_t nparams = 0, nbuffers = 0;
    auto align = [](std::size_t n) { return (n + 15) / 16 * 16; };
    for (std::size_t i = 0; i < descs.size(); ++i) {
      Layer L;
      L.d = descs[i];
      L.in_numel = C * H * W;
      switch (L.d.kind) {
        case Kind::conv: {
          ConvGeom& g = L.conv_g;
          g.c = C, g.h = H, g.w = W, g.k = L.d.out, g.r = g.s = L.d.kernel;
          g.stride = L.d.stride > 0 ? L.d.stride : 1;
          g.pad = L.d.pad;
          g.bias = L.d.bias;
          g.oh = (H + 2 * g.pad - g.r) / g.stride + 1;
          g.ow = (W + 2 * g.pad - g.s) / g.stride + 1;
          L.conv = be.conv(g);
          L.fan_in = g.c * g.r * g.s;
          L.w_numel = g.k * g.c * g.r * g.s;
          L.b_numel = g.bias ? g.k : 0;
          C = g.k, H = g.oh, W = g.ow;
          break;
        }
        case Kind::maxpool:
        case Kind::avgpool: {
          PoolGeom& g = L.pool_g;
          g.kind = L.d.kind == Kind::maxpool ? PoolKind::max : PoolKind::avg;
          g.c = C, g.h = H, g.w = W, g.kh = g.kw = L.d.kernel;
          g.stride = L.d.stride > 0 ? L.d.stride : L.d.kernel;
          g.pad = L.d.pad;
          g.oh = (H + 2 * g.pad - g.kh) / g.stride + 1;
          g.ow = (W + 2 * g.pad - g.kw) / g.stride + 1;
          L.pool = be.pool(g);
          H = g.oh, W = g.ow;
          break;
        }
        case Kind::flatten:
          C = C * H * W, H = W = 1;
          break;
        case Kind::linear: {
          LinearGeom& g = L.linear_g;
          g.in = C * H * W;
          g.out = L.d.out;
          g.bias = L.d.bias;
          L.linear = be.linear(g);
          L.fan_in = g.in;
          L.w_numel = g.out * g.in;
          L.b_numel = g.bias ? g.out : 0;
          C = g.out, H = W = 1;
          break;
        }
        case Kind::batchnorm: {
          BatchNormGeom& g = L.bn_g;
          g.c = C, g.h = H, g.w = W;
          L.bn = be.batch_norm(g);
          L.w_numel = L.b_numel = C;  // gamma, beta
          L.buf_numel = C;            // running mean, running var
          break;
        }
        case Kind::relu:
        case Kind::dropout:
          break;
      }
      L.out_numel = C * H * W;
      if (L.w_numel > 0) {
        L.w_off = nparams;
        nparams += align(static_cast<std::size_t>(L.w_numel));
        if (L.b_numel > 0) {
          L.b_off = nparams;
          nparams += align(static_cast<std::size_t>(L.b_numel));
        }
        L.grad_begin = L.w_off;
        L.grad_end = nparams;
      }
      if (L.buf_numel > 0) {
        L.mean_off = nbuffers;
        nbuffers += align(static_cast<std::size_t>(L.buf_numel));
        L.var_off = nbuffers;
        nbuffers += align(static_cast<std::size_t>(L.buf_numel));
      }
      if (L.d.kind == Kind::dropout) {
        std::uint64_t salt = 0;
        const std::string name = std::string("dropout") + std::to_string(i);
        for (char ch : name) salt = mix64(salt ^ static_cast<unsigned char>(ch));
        L.salt = salt;
      }
      layers_.push_back(std::move(L));
    }
    if (C * H * W != classes)
      throw ConfigError("opnet: the last layer produces " + std::to_string(C * H * W) +
                        " values per sample, expected " + std::to_string(classes));
    nparams_ = nparams;
    nbuffers_ = nbuffers;
    params_ = mem.alloc(nparams);
    grads_ = mem.alloc(nparams);
    buffers_ = mem.alloc(nbuffers);
    const auto mb = static_cast<std::size_t>(max_batch);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      Layer& L = layers_[i];
      if (L.d.kind == Kind::flatten) {
        // A view of the layer below (or of the input, set in forward).
        L.dout = i > 0 ? layers_[i - 1].dout : nullptr;
        continue;
      }
      const std::size_t count = mb * static_cast<std::size_t>(L.out_numel);
      L.out = mem.alloc(count);
      L.dout = mem.alloc(count);
      if (L.d.kind == Kind::dropout) L.mask = mem.alloc(count);
      if (L.d.kind == Kind::batchnorm && i == 0)
        L.scratch = mem.alloc(mb * static_cast<std::size_t>(L.in_numel));
    }
  }

  // Model::init_parameters' draws: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for conv/linear weights and
  // biases, one CounterRng per tensor; batch norm gamma 1, beta 0, running mean 0, running var 1.
  void init(std::uint64_t seed) {
    std::vector<float> p(nparams_, 0.0f), b(nbuffers_, 0.0f);
    std::uint64_t j = 0;  // tensor index, as Model's spec index
    for (Layer& L : layers_) {
      if (L.w_numel == 0) continue;
      const bool affine = L.d.kind == Kind::conv || L.d.kind == Kind::linear;
      const std::int64_t sizes[2] = {L.w_numel, L.b_numel};
      const std::size_t offs[2] = {L.w_off, L.b_off};
      for (int t = 0; t < 2; ++t) {
        if (sizes[t] == 0) continue;
        float* d = p.data() + offs[t];
        if (affine) {
          const double bound = 1.0 / std::sqrt(static_cast<double>(L.fan_in));
          CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::init), 0, j));
          for (std::int64_t i = 0; i < sizes[t]; ++i)
            d[i] = static_cast<float>((2.0 * rng.next_double() - 1.0) * bound);
        } else {
          for (std::int64_t i = 0; i < sizes[t]; ++i) d[i] = t == 0 ? 1.0f : 0.0f;
        }
        ++j;
      }
      if (L.buf_numel > 0)
        for (std::int64_t i = 0; i < L.buf_numel; ++i)
          b[L.var_off + static_cast<std::size_t>(i)] = 1.0f;
    }
    mem_.upload(p.data(), params_, nparams_);
    if (nbuffers_ > 0) mem_.upload(b.data(), buffers_, nbuffers_);
  }

  // x: [n, c, h, w] in the backend's memory. Returns the logits [n, classes] (valid until the next
  // forward). sample_ids (dropout) may be host or backend memory.
  const float* forward(const float* x, std::int64_t n, bool train, std::uint64_t seed = 0,
                       const std::int64_t* sample_ids = nullptr) {
    if (n > max_batch_) throw Error("opnet: batch " + std::to_string(n) + " > max_batch");
    n_ = n;
    train_ = train;
    const float* in = x;
    for (Layer& L : layers_) {
      L.in = in;
      const std::int64_t count = n * L.out_numel;
      switch (L.d.kind) {
        case Kind::conv:
          L.conv->forward(n, in, params_ + L.w_off, L.b_numel ? params_ + L.b_off : nullptr, L.out);
          break;
        case Kind::relu:
          be_.relu_forward(count, in, L.out);
          break;
        case Kind::maxpool:
        case Kind::avgpool:
          L.pool->forward(n, in, L.out, train);
          break;
        case Kind::flatten:
          L.out = const_cast<float*>(in);
          break;
        case Kind::linear:
          L.linear->forward(n, in, params_ + L.w_off, L.b_numel ? params_ + L.b_off : nullptr,
                            L.out);
          break;
        case Kind::batchnorm:
          L.bn->forward(n, in, params_ + L.w_off, params_ + L.b_off, buffers_ + L.mean_off,
                        buffers_ + L.var_off, L.out, train);
          break;
        case Kind::dropout:
          if (train && L.d.p > 0.0f)
            be_.dropout_forward(n, L.out_numel, L.d.p, hash_words(seed, L.salt), sample_ids, in,
                                L.mask, L.out);
          else
            be_.copy(count, in, L.out);
          break;
      }
      in = L.out;
    }
    return in;
  }

  // Backward of the last (training) forward from dlogits; on_layer_done(i) when layer i's
  // parameter gradients are final (reverse order), for overlapped gradient all-reduce.
  void backward(const float* dlogits, const std::function<void(std::size_t)>& on_layer_done = {}) {
    const std::int64_t n = n_;
    const float* dy = dlogits;
    for (std::size_t i = layers_.size(); i-- > 0;) {
      Layer& L = layers_[i];
      float* dx = i > 0 ? layers_[i - 1].dout : nullptr;
      const std::int64_t count = n * L.out_numel;
      switch (L.d.kind) {
        case Kind::conv:
          L.conv->backward(n, L.in, params_ + L.w_off, dy, dx, grads_ + L.w_off,
                           L.b_numel ? grads_ + L.b_off : nullptr);
          break;
        case Kind::relu:
          if (dx) be_.relu_backward(count, L.out, dy, dx);
          break;
        case Kind::maxpool:
        case Kind::avgpool:
          if (dx) L.pool->backward(n, dy, dx);
          break;
        case Kind::flatten:
          dx = const_cast<float*>(dy);  // same memory: nothing to do
          break;
        case Kind::linear:
          L.linear->backward(n, L.in, params_ + L.w_off, dy, dx, grads_ + L.w_off,
                             L.b_numel ? grads_ + L.b_off : nullptr);
          break;
        case Kind::batchnorm:
          L.bn->backward(n, L.in, dy, params_ + L.w_off, dx ? dx : L.scratch, grads_ + L.w_off,
                         grads_ + L.b_off);
          break;
        case Kind::dropout:
          if (dx) {
            if (train_ && L.d.p > 0.0f)
              be_.mul(count, dy, L.mask, dx);
            else
              be_.copy(count, dy, dx);
          }
          break;
      }
      if (on_layer_done && L.grad_end > L.grad_begin) on_layer_done(i);
      dy = dx;
    }
  }

  float* params() const { return params_; }
  float* grads() const { return grads_; }
  float* buffers() const { return buffers_; }
  std::size_t param_count() const { return nparams_; }  // with alignment padding
  std::size_t buffer_count() const { return nbuffers_; }
  std::size_t num_layers() const { return layers_.size(); }
  // [begin, end) of layer i's gradients in the flat buffer; empty without parameters.
  std::pair<std::size_t, std::size_t> grad_range(std::size_t i) const {
    return {layers_[i].grad_begin, layers_[i].grad_end};
  }
  std::int64_t classes() const { return classes_; }
  // 2 x multiply-adds of conv and linear layers per sample (nn::Model's convention).
  double forward_flops() const {
    double f = 0;
    for (const Layer& L : layers_) {
      if (L.d.kind == Kind::conv)
        f += 2.0 * static_cast<double>(L.conv_g.k * L.conv_g.oh * L.conv_g.ow * L.fan_in);
      if (L.d.kind == Kind::linear) f += 2.0 * static_cast<double>(L.w_numel);
    }
    return f;
  }

 private:
  struct Layer {
    LayerDesc d;
    std::int64_t in_numel = 0, out_numel = 0;  // per sample
    ConvGeom conv_g;
    PoolGeom pool_g;
    LinearGeom linear_g;
    BatchNormGeom bn_g;
    std::unique_ptr<ConvOp> conv;
    std::unique_ptr<PoolOp> pool;
    std::unique_ptr<LinearOp> linear;
    std::unique_ptr<BatchNormOp> bn;
    std::int64_t fan_in = 0, w_numel = 0, b_numel = 0, buf_numel = 0;
    std::size_t w_off = 0, b_off = 0, mean_off = 0, var_off = 0;
    std::size_t grad_begin = 0, grad_end = 0;
    std::uint64_t salt = 0;
    const float* in = nullptr;
    float* out = nullptr;
    float* dout = nullptr;
    float* mask = nullptr;
    float* scratch = nullptr;
  };

  Backend& be_;
  Memory& mem_;
  std::int64_t max_batch_, classes_;
  std::vector<Layer> layers_;
  std::size_t nparams_ = 0, nbuffers_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* buffers_ = nullptr;
  std::int64_t n_ = 0;
  bool train_ = false;
};

}  // namespace ddp::backend::opnet
