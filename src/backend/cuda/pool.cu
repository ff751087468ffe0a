// Max and average pooling on cuDNN. Max pooling uses CUDNN_POOLING_MAX_DETERMINISTIC; average
// pooling excludes the padding, as the CPU's pooling_avg_exclude_padding. Output extents follow
// PyTorch's floor mode (cuDNN's, checked against the geometry).
//
// cuDNN's pooling backward recomputes the window maxima from the forward input and output instead
// of keeping an argmax: the op remembers the x and y of its last training forward (the CPU op keeps
// its argmax from that same call), and backward requires that they are unchanged, which holds for
// the model's activation buffers between a forward and its backward.
#include <map>
#include <string>

#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

class Pool final : public PoolOp {
 public:
  Pool(std::shared_ptr<Context> ctx, const PoolGeom& g) : ctx_(std::move(ctx)), g_(g) {
    desc_ = make_pool_desc();
    const cudnnPoolingMode_t mode = g.kind == PoolKind::max
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    DDP_CUDA_CHECK(cudnnSetPooling2dDescriptor(
        desc_, mode, CUDNN_NOT_PROPAGATE_NAN, to_int(g.kh, "pooling window"),
        to_int(g.kw, "pooling window"), to_int(g.pad_h, "pooling padding"),
        to_int(g.pad_w, "pooling padding"), to_int(g.stride_h, "pooling stride"),
        to_int(g.stride_w, "pooling stride")));
  }

  void forward(std::int64_t n, const float* x, float* y, bool training) override {
    Plan& p = plan(n);
    DDP_CUDA_CHECK(cudnnPoolingForward(ctx_->cudnn(), desc_, &kOne, p.x, x, &kZero, p.y, y));
    if (training) {
      last_x_ = x;
      last_y_ = y;
      last_train_n_ = n;
    }
  }

  void backward(std::int64_t n, const float* dy, float* dx) override {
    if (n != last_train_n_)
      throw Error("internal: pooling backward without a matching training forward");
    Plan& p = plan(n);
    DDP_CUDA_CHECK(cudnnPoolingBackward(ctx_->cudnn(), desc_, &kOne, p.y, last_y_, p.y, dy, p.x,
                                        last_x_, &kZero, p.x, dx));
  }

 private:
  struct Plan {
    TensorDesc x, y;
  };

  Plan& plan(std::int64_t n) {
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    Plan p;
    p.x = make_tensor_desc();
    p.y = make_tensor_desc();
    set_tensor_4d(p.x, n, g_.c, g_.h, g_.w);
    set_tensor_4d(p.y, n, g_.c, g_.oh, g_.ow);
    int on = 0, oc = 0, oh = 0, ow = 0;
    DDP_CUDA_CHECK(cudnnGetPooling2dForwardOutputDim(desc_, p.x, &on, &oc, &oh, &ow));
    if (on != n || oc != g_.c || oh != g_.oh || ow != g_.ow)
      throw Error("internal: cuDNN pools " + std::to_string(g_.c) + "x" + std::to_string(g_.h) +
                  "x" + std::to_string(g_.w) + " to " + std::to_string(oh) + "x" +
                  std::to_string(ow) + ", the layer expects " + std::to_string(g_.oh) + "x" +
                  std::to_string(g_.ow));
    return plans_.emplace(n, std::move(p)).first->second;
  }

  std::shared_ptr<Context> ctx_;
  PoolGeom g_;
  PoolDesc desc_;
  std::map<std::int64_t, Plan> plans_;
  const float* last_x_ = nullptr;
  const float* last_y_ = nullptr;
  std::int64_t last_train_n_ = -1;
};

}  // namespace

std::unique_ptr<PoolOp> make_pool(std::shared_ptr<Context> ctx, const PoolGeom& g) {
  return std::make_unique<Pool>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
