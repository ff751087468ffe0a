// Convolution on cuDNN (the v9 library's legacy convolution API, still shipped and supported
// through 9.x). Activations NCHW, weights [k, c / groups, r, s] (PyTorch's layouts, as on the
// CPU): the flat parameter buffer, snapshots and the other layers need no conversion. Groups go
// through cuDNN's group count (the filter descriptor then holds one group's input channels),
// dilation through the convolution descriptor.
//
// Algorithms are chosen once per batch size (a "plan") for each pass: by default
// (CudaOptions::benchmark) by timing every candidate (cudnnFindConvolution*Algorithm, which ranks
// them by measured time and reports each one's determinism), otherwise by cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7; the old cudnnGetConvolution*Algorithm without _v7 is gone
// from cuDNN 8+). From the ranked list we take the first that succeeded, fits the shared workspace
// limit, is deterministic when asked (falling back to any when none is), and uses no TF32
// tensor-core math unless allowed: with timing, the fastest deterministic algorithm rather than
// the heuristics' first deterministic guess (which was 45x slower than the best for resnet50's
// bf16 1x1 stride-2 backward-filter). Should the chosen one fail when run, the next such entry is
// taken. The backward-data plan is made only when an input gradient is asked for (never for the
// first layer).
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels.cuh"
#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

bool tensor_op_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

struct Chosen {
  int algo = 0;
  std::size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool deterministic = false;
};

// The usable entries of cuDNN's ranking, best first: those that succeeded, fit the workspace limit
// and use tensor-core math only when allowed; deterministic ones first when asked (the others
// after them, as fallbacks). `prepare(perf)` sets the pass's descriptor to the entry's math type
// and returns the workspace it needs (nullopt: cuDNN refuses the combination); the descriptor is
// left set for the first entry.
template <class Perf, class Prepare>
std::vector<Chosen> usable(const std::vector<Perf>& ranking, const CudaOptions& o, bool tensor_ops,
                           Prepare prepare) {
  std::vector<Chosen> out;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Perf& p : ranking) {
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      const bool det = p.determinism == CUDNN_DETERMINISTIC;
      if (o.deterministic && det != (pass == 0)) continue;  // deterministic ones in pass 0
      if (!o.deterministic && pass == 1) continue;
      if (!tensor_ops && tensor_op_math(p.mathType)) continue;
      // May convert fp32 (or bf16) data to fp16 inside the algorithm: never asked for.
      if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      const std::optional<std::size_t> ws = prepare(p);
      if (!ws || *ws > o.workspace_limit_bytes) continue;
      out.push_back(Chosen{static_cast<int>(p.algo), *ws, p.mathType, det});
    }
  }
  return out;
}

class Conv final : public ConvOp {
 public:
  Conv(std::shared_ptr<Context> ctx, const ConvGeom& g) : ctx_(std::move(ctx)), g_(g) {
    w_desc_ = make_filter_desc();
    DDP_CUDA_CHECK(cudnnSetFilter4dDescriptor(
        w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, to_int(g.k, "output channels"),
        to_int(g.c / g.groups, "input channels per group"), to_int(g.r, "kernel height"),
        to_int(g.s, "kernel width")));
    if (g.bias) {
      b_desc_ = make_tensor_desc();
      set_tensor_4d(b_desc_, 1, g.k, 1, 1);
    }
    if (ctx_->half()) {
      wh_desc_ = make_filter_desc();
      DDP_CUDA_CHECK(cudnnSetFilter4dDescriptor(
          wh_desc_, ctx_->half_cudnn(), CUDNN_TENSOR_NCHW, to_int(g.k, "output channels"),
          to_int(g.c / g.groups, "input channels per group"), to_int(g.r, "kernel height"),
          to_int(g.s, "kernel width")));
    }
  }

  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    Plan& p = plan(n);
    if (const Half* hf = ctx_->half()) {
      // Inputs and weights rounded to 16 bits, products accumulated in fp32 (cuDNN's pseudo-half
      // configuration), the output back to fp32.
      const cudaStream_t s = ctx_->stream();
      void* xh = ctx_->half_scratch(0, n * x_count());
      void* wh = ctx_->half_scratch(1, w_count());
      void* yh = ctx_->half_scratch(2, n * y_count());
      launch_to_half(s, *hf, n * x_count(), x, xh);
      launch_to_half(s, *hf, w_count(), w, wh);
      run("forward", n, p.fwd, p.fwd_rest, p.fwd_desc, [&](const Chosen& c) {
        return cudnnConvolutionForward(ctx_->cudnn(), &kOne, p.xh, xh, wh_desc_, wh, p.fwd_desc,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                       ctx_->workspace(), c.workspace, &kZero, p.yh, yh);
      });
      launch_from_half(s, *hf, n * y_count(), yh, y);
    } else {
      run("forward", n, p.fwd, p.fwd_rest, p.fwd_desc, [&](const Chosen& c) {
        return cudnnConvolutionForward(ctx_->cudnn(), &kOne, p.x, x, w_desc_, w, p.fwd_desc,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                       ctx_->workspace(), c.workspace, &kZero, p.y, y);
      });
    }
    if (g_.bias) DDP_CUDA_CHECK(cudnnAddTensor(ctx_->cudnn(), &kOne, b_desc_, b, &kOne, p.y, y));
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    Plan& p = plan(n);
    if (g_.bias)
      DDP_CUDA_CHECK(
          cudnnConvolutionBackwardBias(ctx_->cudnn(), &kOne, p.y, dy, &kZero, b_desc_, db));
    if (const Half* hf = ctx_->half()) {
      const cudaStream_t s = ctx_->stream();
      void* xh = ctx_->half_scratch(0, n * x_count());
      void* wh = ctx_->half_scratch(1, w_count());
      void* dyh = ctx_->half_scratch(2, n * y_count());
      void* dwh = ctx_->half_scratch(3, w_count());
      launch_to_half(s, *hf, n * x_count(), x, xh);
      launch_to_half(s, *hf, n * y_count(), dy, dyh);
      run("backward-filter", n, p.filter, p.filter_rest, p.filter_desc, [&](const Chosen& c) {
        return cudnnConvolutionBackwardFilter(
            ctx_->cudnn(), &kOne, p.xh, xh, p.yh, dyh, p.filter_desc,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ctx_->workspace(), c.workspace,
            &kZero, wh_desc_, dwh);
      });
      launch_from_half(s, *hf, w_count(), dwh, dw);
      if (dx) {
        if (!p.data) plan_data(p, n);
        launch_to_half(s, *hf, w_count(), w, wh);
        // The input's copy is no longer needed: its slot takes the input gradient (stream order).
        run("backward-data", n, *p.data, p.data_rest, p.data_desc, [&](const Chosen& c) {
          return cudnnConvolutionBackwardData(ctx_->cudnn(), &kOne, wh_desc_, wh, p.yh, dyh,
                                              p.data_desc,
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                              ctx_->workspace(), c.workspace, &kZero, p.xh, xh);
        });
        launch_from_half(s, *hf, n * x_count(), xh, dx);
      }
      return;
    }
    run("backward-filter", n, p.filter, p.filter_rest, p.filter_desc, [&](const Chosen& c) {
      return cudnnConvolutionBackwardFilter(ctx_->cudnn(), &kOne, p.x, x, p.y, dy, p.filter_desc,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                                            ctx_->workspace(), c.workspace, &kZero, w_desc_, dw);
    });
    if (dx) {
      if (!p.data) plan_data(p, n);
      run("backward-data", n, *p.data, p.data_rest, p.data_desc, [&](const Chosen& c) {
        return cudnnConvolutionBackwardData(ctx_->cudnn(), &kOne, w_desc_, w, p.y, dy, p.data_desc,
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                            ctx_->workspace(), c.workspace, &kZero, p.x, dx);
      });
    }
  }

 private:
  struct Plan {
    TensorDesc x, y;
    TensorDesc xh, yh;                          // reduced precision (unset for fp32)
    ConvDesc fwd_desc, filter_desc, data_desc;  // one per pass: each carries its algorithm's math
    Chosen fwd, filter;
    std::optional<Chosen> data;
    // The next usable algorithms of each pass, for when the chosen one fails at run time.
    std::vector<Chosen> fwd_rest, filter_rest, data_rest;
  };

  // Takes the first of a pass's usable algorithms; the others wait in `rest`.
  Chosen adopt(const std::vector<Chosen>& list, std::vector<Chosen>& rest,
               cudnnConvolutionDescriptor_t desc) {
    rest.assign(list.begin() + 1, list.end());
    DDP_CUDA_CHECK(cudnnSetConvolutionMathType(desc, math_for(list.front().math)));
    return list.front();
  }

  // Runs one pass with its algorithm; when cuDNN fails it at run time (not supported for these
  // pointers' alignment, execution failed), takes the next in the ranking, as PyTorch does.
  template <class Call>
  void run(const char* pass, std::int64_t n, Chosen& cur, std::vector<Chosen>& rest,
           cudnnConvolutionDescriptor_t desc, Call call) {
    for (;;) {
      const cudnnStatus_t st = call(cur);
      if (st == CUDNN_STATUS_SUCCESS) return;
      if (rest.empty() || st == CUDNN_STATUS_BAD_PARAM) throw_cudnn(st, pass, __FILE__, __LINE__);
      std::fprintf(
          stderr,
          "ddp_train: warning: cuDNN %s algorithm %d failed for the %s (%s); taking the "
          "next in cuDNN's ranking%s\n",
          pass, cur.algo, describe(n).c_str(), cudnnGetErrorString(st),
          cur.deterministic && !rest.front().deterministic ? ", which is not deterministic" : "");
      // The workspace first: should that fail, the plan still holds what it can run.
      ctx_->reserve_workspace(rest.front().workspace);
      DDP_CUDA_CHECK(cudnnSetConvolutionMathType(desc, math_for(rest.front().math)));
      cur = rest.front();
      rest.erase(rest.begin());
    }
  }

  std::string describe(std::int64_t n) const {
    auto s = [](std::int64_t v) { return std::to_string(v); };
    return "convolution " + s(g_.c) + "x" + s(g_.h) + "x" + s(g_.w) + " -> " + s(g_.k) + "x" +
           s(g_.oh) + "x" + s(g_.ow) + " (kernel " + s(g_.r) + "x" + s(g_.s) + ", stride " +
           s(g_.stride_h) + "x" + s(g_.stride_w) + ", padding " + s(g_.pad_h) + "x" + s(g_.pad_w) +
           ", dilation " + s(g_.dil_h) + "x" + s(g_.dil_w) + ", groups " + s(g_.groups) +
           ", batch " + s(n) + ")";
  }

  std::int64_t x_count() const { return g_.c * g_.h * g_.w; }  // per sample
  std::int64_t y_count() const { return g_.k * g_.oh * g_.ow; }
  std::int64_t w_count() const { return g_.k * (g_.c / g_.groups) * g_.r * g_.s; }
  // The descriptors the convolution itself runs on: fp32 or the reduced precision.
  cudnnTensorDescriptor_t cx(const Plan& p) const { return ctx_->half() ? p.xh.get() : p.x.get(); }
  cudnnTensorDescriptor_t cy(const Plan& p) const { return ctx_->half() ? p.yh.get() : p.y.get(); }
  cudnnFilterDescriptor_t cw() const { return ctx_->half() ? wh_desc_.get() : w_desc_.get(); }

  ConvDesc make_desc() const {
    ConvDesc d = make_conv_desc();
    DDP_CUDA_CHECK(cudnnSetConvolution2dDescriptor(
        d, to_int(g_.pad_h, "padding"), to_int(g_.pad_w, "padding"), to_int(g_.stride_h, "stride"),
        to_int(g_.stride_w, "stride"), to_int(g_.dil_h, "dilation"), to_int(g_.dil_w, "dilation"),
        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DDP_CUDA_CHECK(cudnnSetConvolutionGroupCount(d, to_int(g_.groups, "groups")));
    DDP_CUDA_CHECK(cudnnSetConvolutionMathType(d, ctx_->conv_math()));
    return d;
  }

  // The math type a chosen algorithm runs with: FMA unless tensor cores are allowed (TF32, or a
  // reduced precision), then cuDNN's choice.
  cudnnMathType_t math_for(cudnnMathType_t ranked) const {
    return ctx_->tensor_ops_allowed() ? ranked : CUDNN_FMA_MATH;
  }

  [[noreturn]] void no_algorithm(const char* pass, std::int64_t n) const {
    throw SystemError("cuDNN offers no " + std::string(pass) + " algorithm for the " + describe(n) +
                      " within the workspace limit of " +
                      std::to_string(ctx_->options().workspace_limit_bytes >> 20) +
                      " MiB; raise the limit or use a smaller batch");
  }

  Plan& plan(std::int64_t n) {
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    Plan p;
    p.x = make_tensor_desc();
    p.y = make_tensor_desc();
    set_tensor_4d(p.x, n, g_.c, g_.h, g_.w);
    set_tensor_4d(p.y, n, g_.k, g_.oh, g_.ow);
    if (ctx_->half()) {
      p.xh = make_tensor_desc();
      p.yh = make_tensor_desc();
      set_tensor_4d(p.xh, n, g_.c, g_.h, g_.w, ctx_->half_cudnn());
      set_tensor_4d(p.yh, n, g_.k, g_.oh, g_.ow, ctx_->half_cudnn());
    }
    p.fwd_desc = make_desc();
    p.filter_desc = make_desc();
    p.data_desc = make_desc();
    int on = 0, oc = 0, oh = 0, ow = 0;
    DDP_CUDA_CHECK(
        cudnnGetConvolution2dForwardOutputDim(p.fwd_desc, p.x, w_desc_, &on, &oc, &oh, &ow));
    if (on != n || oc != g_.k || oh != g_.oh || ow != g_.ow)
      throw Error("internal: cuDNN computes a " + std::to_string(oc) + "x" + std::to_string(oh) +
                  "x" + std::to_string(ow) + " output for the " + describe(n));
    cudnnHandle_t h = ctx_->cudnn();
    const CudaOptions& o = ctx_->options();

    {  // forward
      int max = 0;
      DDP_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(max));
      int got = 0;
      if (o.benchmark)
        DDP_CUDA_CHECK(cudnnFindConvolutionForwardAlgorithm(h, cx(p), cw(), p.fwd_desc, cy(p), max,
                                                            &got, r.data()));
      else
        DDP_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, cx(p), cw(), p.fwd_desc, cy(p),
                                                              max, &got, r.data()));
      r.resize(static_cast<std::size_t>(got));
      const auto c = usable(
          r, o, ctx_->tensor_ops_allowed(),
          [&](const cudnnConvolutionFwdAlgoPerf_t& perf) -> std::optional<std::size_t> {
            std::size_t ws = 0;
            if (cudnnSetConvolutionMathType(p.fwd_desc, math_for(perf.mathType)) !=
                    CUDNN_STATUS_SUCCESS ||
                cudnnGetConvolutionForwardWorkspaceSize(h, cx(p), cw(), p.fwd_desc, cy(p),
                                                        perf.algo, &ws) != CUDNN_STATUS_SUCCESS)
              return std::nullopt;
            return ws;
          });
      if (c.empty()) no_algorithm("forward", n);
      p.fwd = adopt(c, p.fwd_rest, p.fwd_desc);
    }
    {  // backward filter (and bias)
      int max = 0;
      DDP_CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(max));
      int got = 0;
      if (o.benchmark)
        DDP_CUDA_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, cx(p), cy(p), p.filter_desc,
                                                                   cw(), max, &got, r.data()));
      else
        DDP_CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, cx(p), cy(p), p.filter_desc,
                                                                     cw(), max, &got, r.data()));
      r.resize(static_cast<std::size_t>(got));
      const auto c = usable(
          r, o, ctx_->tensor_ops_allowed(),
          [&](const cudnnConvolutionBwdFilterAlgoPerf_t& perf) -> std::optional<std::size_t> {
            std::size_t ws = 0;
            if (cudnnSetConvolutionMathType(p.filter_desc, math_for(perf.mathType)) !=
                    CUDNN_STATUS_SUCCESS ||
                cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    h, cx(p), cy(p), p.filter_desc, cw(), perf.algo, &ws) != CUDNN_STATUS_SUCCESS)
              return std::nullopt;
            return ws;
          });
      if (c.empty()) no_algorithm("backward-filter", n);
      p.filter = adopt(c, p.filter_rest, p.filter_desc);
    }
    ctx_->reserve_workspace(std::max(p.fwd.workspace, p.filter.workspace));
    return plans_.emplace(n, std::move(p)).first->second;
  }

  void plan_data(Plan& p, std::int64_t n) {
    cudnnHandle_t h = ctx_->cudnn();
    const CudaOptions& o = ctx_->options();
    int max = 0;
    DDP_CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(max));
    int got = 0;
    if (o.benchmark)
      DDP_CUDA_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, cw(), cy(p), p.data_desc, cx(p),
                                                               max, &got, r.data()));
    else
      DDP_CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, cw(), cy(p), p.data_desc, cx(p),
                                                                 max, &got, r.data()));
    r.resize(static_cast<std::size_t>(got));
    const auto c = usable(
        r, o, ctx_->tensor_ops_allowed(),
        [&](const cudnnConvolutionBwdDataAlgoPerf_t& perf) -> std::optional<std::size_t> {
          std::size_t ws = 0;
          if (cudnnSetConvolutionMathType(p.data_desc, math_for(perf.mathType)) !=
                  CUDNN_STATUS_SUCCESS ||
              cudnnGetConvolutionBackwardDataWorkspaceSize(h, cw(), cy(p), p.data_desc, cx(p),
                                                           perf.algo, &ws) != CUDNN_STATUS_SUCCESS)
            return std::nullopt;
          return ws;
        });
    if (c.empty()) no_algorithm("backward-data", n);
    p.data = adopt(c, p.data_rest, p.data_desc);
    ctx_->reserve_workspace(p.data->workspace);
  }

  std::shared_ptr<Context> ctx_;
  ConvGeom g_;
  FilterDesc w_desc_, wh_desc_;
  TensorDesc b_desc_;
  std::map<std::int64_t, Plan> plans_;
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(std::shared_ptr<Context> ctx, const ConvGeom& g) {
  return std::make_unique<Conv>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
