// Convolution on oneDNN. Weights stay in PyTorch's plain layout (OIHW) at the op's boundary, so the
// flat parameter buffer and snapshots need no conversion; activations are plain NCHW or, where the
// graph keeps them so (ConvGeom::src_block/dst_block), oneDNN's blocked nChw8c/nChw16c. Inside,
// each pass (forward, backward-data, backward-weights) lets oneDNN choose its layouts (blocked
// nChw16c and friends run the JIT direct-convolution kernels, 2-5x faster than the GEMM path plain
// NCHW gets) and reorders at the edges: never for blocked activations, which are already its own.
// Measured with bench/: see BENCHMARKS.md. Primitives are built once per slice size (the full slice
// and a batch's short last one). Grouped convolutions use the same path (depthwise ones with one
// output channel per input channel get oneDNN's jit_dw kernels; other group shapes its grouped
// direct or GEMM kernels).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "cpu_kernels.hpp"
#include "cpu_ops.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "dnnl_util.hpp"

namespace ddp::backend::cpu {
namespace {

// Scratch for the primitives' internal layouts, shared by every convolution of the thread: each
// pass reorders in and out within one call, so nothing lives in it between calls. With the batch
// sliced (Conv::slice) every layer's copies reuse the same few hundred KB, which stay in cache,
// instead of each argument of each layer holding its own batch-sized buffer. Per thread, because
// nothing else orders two threads' calls; each call makes sure its thread's is large enough.
struct Arena {
  std::vector<std::byte> bytes;
  std::byte* base = nullptr;  // 4 KiB aligned: vector storage is only 16-byte aligned
  void reserve(std::size_t n) {
    if (base && base + n <= bytes.data() + bytes.size()) return;
    bytes.assign(n + kPage, std::byte{0});
    const auto addr = reinterpret_cast<std::uintptr_t>(bytes.data());
    base = bytes.data() + ((kPage - addr % kPage) % kPage);
  }
  static constexpr std::size_t kPage = 4096;
};
Arena& arena() {
  thread_local Arena a;
  return a;
}

// One argument of a primitive: the user's plain buffer, and when the primitive wants another
// layout, an internal buffer at `offset` in the arena plus the reorder between the two.
struct Arg {
  dnnl::memory user;
  std::optional<dnnl::memory> inner;
  dnnl::reorder to_inner, from_inner;
  std::size_t offset = 0;

  // Places the internal buffer (if any) at `end` of the pass's region and advances `end` past it.
  Arg(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted, bool input,
      std::size_t& end)
      : user(mem(plain)) {
    if (wanted == plain) return;
    inner = mem(wanted);
    offset = end;
    end += (wanted.get_size() + kAlign - 1) / kAlign * kAlign;
    if (input)
      to_inner = dnnl::reorder(user, *inner);
    else
      from_inner = dnnl::reorder(*inner, user);
  }

  // Before the primitive: bring an input into the primitive's layout (unless `convert` is false:
  // the internal buffer already holds it, from an earlier slice of the same call).
  const dnnl::memory& in(const void* p, bool convert = true) {
    set_handle(user, p);
    if (!inner) return user;
    set_handle(*inner, arena().base + offset);
    if (convert) to_inner.execute(stream(), user, *inner);
    return *inner;
  }
  // The memory an output is written to; out_done() copies it to the user's buffer.
  const dnnl::memory& out(void* p) {
    set_handle(user, p);
    if (!inner) return user;
    set_handle(*inner, arena().base + offset);
    return *inner;
  }
  void out_done() {
    if (inner) from_inner.execute(stream(), *inner, user);
  }

  static constexpr std::size_t kAlign = 64;
};

class Conv final : public ConvOp {
 public:
  explicit Conv(const ConvGeom& g) : g_(g) {}

  // The batch goes through in slices (see slice()): per-sample results do not depend on the
  // slicing, and the weight gradient is the sum of the slices' in a fixed order.
  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    const Prims* last = nullptr;
    for (std::int64_t off = 0; off < n; off += slice()) {
      auto& p = ready(std::min(slice(), n - off));
      forward_slice(p, x + off * in_size(), w, &p != last, b, y + off * out_size());
      last = &p;
    }
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    const std::int64_t wn = g_.k * (g_.c / g_.groups) * g_.r * g_.s;
    const Prims* last = nullptr;
    for (std::int64_t off = 0; off < n; off += slice()) {
      auto& p = ready(std::min(slice(), n - off));
      // The first slice writes the gradients; later ones go to scratch and are added.
      if (off > 0 && part_.size() < static_cast<std::size_t>(wn + g_.k))
        part_.resize(static_cast<std::size_t>(wn + g_.k));
      float* sdw = off == 0 ? dw : part_.data();
      float* sdb = off == 0 ? db : part_.data() + wn;
      backward_slice(p, x + off * in_size(), w, &p != last, dy + off * out_size(),
                     dx ? dx + off * in_size() : nullptr, sdw, sdb);
      if (off > 0) {
        add(wn, sdw, dw);
        if (g_.bias) add(g_.k, sdb, db);
      }
      last = &p;
    }
  }

 private:
  struct Prims;

  std::int64_t in_size() const { return g_.c * g_.h * g_.w; }
  std::int64_t out_size() const { return g_.k * g_.oh * g_.ow; }

  // Samples per oneDNN call. The internal (blocked) copies of a whole batch are megabytes per
  // layer - LeNet's first convolution pads 6 channels to 16: 12.8 MB at batch 256, written and
  // read back twice a step - and streaming them through L3 and memory is a large part of the
  // layer's time; with several ranks on one machine it is also memory bandwidth the ranks take
  // from each other. Slices of 32 samples per thread keep a slice's copies in cache between
  // the reorder and the primitive (measured: BENCHMARKS.md); fewer samples per thread make the
  // threads' fork-join per call the larger cost.
  std::int64_t slice() {
    if (slice_ == 0) slice_ = kSlicePerThread * std::max(1, compute_threads());
    return slice_;
  }
  static constexpr std::int64_t kSlicePerThread = 32;

  // Slices of one call share the reordered weights: `weights` says whether to reorder them.
  void forward_slice(Prims& p, const float* x, const float* w, bool weights, const float* b,
                     float* y) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, p.f_src->in(x)},
                                               {DNNL_ARG_WEIGHTS, p.f_wei->in(w, weights)},
                                               {DNNL_ARG_DST, p.f_dst->out(y)}};
    if (g_.bias) {
      set_handle(p.bias, b);
      args.emplace(DNNL_ARG_BIAS, p.bias);
    }
    p.fwd.execute(stream(), args);
    p.f_dst->out_done();
    stream().wait();
  }

  void backward_slice(Prims& p, const float* x, const float* w, bool weights, const float* dy,
                      float* dx, float* dw, float* db) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, p.w_src->in(x)},
                                               {DNNL_ARG_DIFF_DST, p.w_ddst->in(dy)},
                                               {DNNL_ARG_DIFF_WEIGHTS, p.w_dwei->out(dw)}};
    if (g_.bias) {
      set_handle(p.dbias, db);
      args.emplace(DNNL_ARG_DIFF_BIAS, p.dbias);
    }
    p.bwd_w.execute(stream(), args);
    p.w_dwei->out_done();
    if (dx) {
      // The weights pass's copy of dy, when the data pass wants the same layout.
      const dnnl::memory& ddst = p.d_ddst ? p.d_ddst->in(dy) : p.w_ddst->in(dy, false);
      p.bwd_d.execute(stream(), {{DNNL_ARG_DIFF_DST, ddst},
                                 {DNNL_ARG_WEIGHTS, p.d_wei->in(w, weights)},
                                 {DNNL_ARG_DIFF_SRC, p.d_dsrc->out(dx)}});
      p.d_dsrc->out_done();
    }
    stream().wait();
  }

  struct Prims {
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data bwd_d;
    dnnl::convolution_backward_weights bwd_w;
    std::optional<Arg> f_src, f_wei, f_dst, w_src, w_ddst, w_dwei, d_ddst, d_wei, d_dsrc;
    dnnl::memory bias, dbias;
    std::size_t arena_bytes = 0;  // the larger pass's internal buffers
  };

  // The primitives for a slice of n samples, with this thread's arena large enough for them
  // (checked on every call: another thread's, or a smaller, arena may be the current one).
  Prims& ready(std::int64_t n) {
    auto it = cache_.find(n);
    if (it == cache_.end()) it = cache_.emplace(n, build(n)).first;
    arena().reserve(it->second.arena_bytes);
    return it->second;
  }

  // Built whole before it enters the cache, so a failure leaves nothing half-made there.
  Prims build(std::int64_t n) const {
    using dims = dnnl::memory::dims;
    const auto src = md({n, g_.c, g_.h, g_.w}, activation_tag(g_.src_block));
    // Grouped weights are oneDNN's 5-D goihw, the same bytes as PyTorch's [k, c/groups, r, s].
    const dims wdims = g_.groups == 1
                           ? dims{g_.k, g_.c, g_.r, g_.s}
                           : dims{g_.groups, g_.k / g_.groups, g_.c / g_.groups, g_.r, g_.s};
    const auto wei = md(wdims, g_.groups == 1 ? tag::oihw : tag::goihw);
    const auto bias = md({g_.k}, tag::x);
    const auto dst = md({n, g_.k, g_.oh, g_.ow}, activation_tag(g_.dst_block));
    const auto src_any = md({n, g_.c, g_.h, g_.w}, tag::any);
    const auto wei_any = md(wdims, tag::any);
    const auto dst_any = md({n, g_.k, g_.oh, g_.ow}, tag::any);
    const dims strides{g_.stride_h, g_.stride_w}, pad{g_.pad_h, g_.pad_w};
    // oneDNN counts dilation from 0 (a dense kernel), PyTorch from 1.
    const dims dil{g_.dil_h - 1, g_.dil_w - 1};
    // Bottom/right padding so that the output extent is exactly oh/ow (PyTorch floors).
    const dims pad_r{(g_.oh - 1) * g_.stride_h + (g_.r - 1) * g_.dil_h + 1 - g_.h - g_.pad_h,
                     (g_.ow - 1) * g_.stride_w + (g_.s - 1) * g_.dil_w + 1 - g_.w - g_.pad_w};
    const auto alg = dnnl::algorithm::convolution_direct;
    auto fwd_desc =
        g_.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_any,
                                                  wei_any, bias, dst_any, strides, dil, pad, pad_r)
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_any,
                                                  wei_any, dst_any, strides, dil, pad, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, engine());
    // The input gradient of a convolution with very few input channels (the first layer; never
    // needed there) is faster on plain GEMM; otherwise let oneDNN choose.
    // (Plain NCHW throughout: a blocked dy is reordered for it.)
    const bool plain_bwd_d = g_.c < 4 && g_.groups == 1;
    const auto dst_plain = md({n, g_.k, g_.oh, g_.ow}, tag::nchw);
    dnnl::convolution_backward_data::primitive_desc bwd_d_pd(
        dnnl::convolution_backward_data::desc(
            alg, plain_bwd_d ? src : src_any, plain_bwd_d ? wei : wei_any,
            plain_bwd_d ? dst_plain : dst_any, strides, dil, pad, pad_r),
        engine(), fwd_pd);
    auto bw_desc = g_.bias ? dnnl::convolution_backward_weights::desc(
                                 alg, src_any, wei_any, bias, dst_any, strides, dil, pad, pad_r)
                           : dnnl::convolution_backward_weights::desc(
                                 alg, src_any, wei_any, dst_any, strides, dil, pad, pad_r);
    dnnl::convolution_backward_weights::primitive_desc bwd_w_pd(bw_desc, engine(), fwd_pd);

    Prims p;
    p.fwd = dnnl::convolution_forward(fwd_pd);
    p.bwd_d = dnnl::convolution_backward_data(bwd_d_pd);
    p.bwd_w = dnnl::convolution_backward_weights(bwd_w_pd);
    // Forward and backward are separate calls, so both passes start at the arena's beginning.
    std::size_t fwd_end = 0, bwd_end = 0;
    p.f_src.emplace(src, fwd_pd.src_desc(), true, fwd_end);
    p.f_wei.emplace(wei, fwd_pd.weights_desc(), true, fwd_end);
    p.f_dst.emplace(dst, fwd_pd.dst_desc(), false, fwd_end);
    p.w_src.emplace(src, bwd_w_pd.src_desc(), true, bwd_end);
    p.w_ddst.emplace(dst, bwd_w_pd.diff_dst_desc(), true, bwd_end);
    p.w_dwei.emplace(wei, bwd_w_pd.diff_weights_desc(), false, bwd_end);
    // Both backward passes read dy; one reorder serves both when they want the same layout (most
    // layers: a whole pass over dy saved, the cost of a depthwise convolution's compute).
    if (bwd_d_pd.diff_dst_desc() != bwd_w_pd.diff_dst_desc())
      p.d_ddst.emplace(dst, bwd_d_pd.diff_dst_desc(), true, bwd_end);
    p.d_wei.emplace(wei, bwd_d_pd.weights_desc(), true, bwd_end);
    p.d_dsrc.emplace(src, bwd_d_pd.diff_src_desc(), false, bwd_end);
    p.arena_bytes = std::max(fwd_end, bwd_end);
    p.bias = mem(bias);
    p.dbias = mem(bias);
    return p;
  }

  ConvGeom g_;
  std::map<std::int64_t, Prims> cache_;
  std::int64_t slice_ = 0;   // fixed at the first call: the compute threads do not change
  std::vector<float> part_;  // a later slice's weight and bias gradients
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(const ConvGeom& g) {
  check_block(g.src_block, g.c, "convolution input");
  check_block(g.dst_block, g.k, "convolution output");
  return std::make_unique<Conv>(g);
}

}  // namespace ddp::backend::cpu
