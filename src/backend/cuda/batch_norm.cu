// Batch normalisation on cuDNN (spatial mode: one mean/variance per channel over N, H and W; for
// feature vectors h = w = 1, the same as per-activation). The running statistics follow PyTorch:
// running = (1 - momentum) * running + momentum * batch statistic, with the unbiased variance,
// which is what cuDNN's exponentialAverageFactor update computes (PyTorch hands its running
// buffers to cuDNN unchanged). The batch mean and inverse standard deviation of the last training
// forward are kept for backward, as the CPU op keeps its mean and variance.
#include <string>

#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

class BatchNorm final : public BatchNormOp {
 public:
  BatchNorm(std::shared_ptr<Context> ctx, const BatchNormGeom& g)
      : ctx_(std::move(ctx)),
        g_(g),
        saved_mean_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)),
        saved_inv_std_(ctx_->device(), static_cast<std::size_t>(g.c) * sizeof(float)) {
    if (static_cast<double>(g.eps) < CUDNN_BN_MIN_EPSILON)
      throw ConfigError("batchnorm: eps = " + std::to_string(g.eps) +
                        " is below cuDNN's minimum of " + std::to_string(CUDNN_BN_MIN_EPSILON));
    x_desc_ = make_tensor_desc();
    bn_desc_ = make_tensor_desc();
    set_tensor_4d(bn_desc_, 1, g.c, 1, 1);
  }

  void forward(std::int64_t n, const float* x, const float* gamma, const float* beta,
               float* running_mean, float* running_var, float* y, bool training) override {
    set_shape(n);
    if (training) {
      DDP_CUDA_CHECK(cudnnBatchNormalizationForwardTraining(
          ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, bn_desc_,
          gamma, beta, static_cast<double>(g_.momentum), running_mean, running_var,
          static_cast<double>(g_.eps), saved_mean_.floats(), saved_inv_std_.floats()));
      last_train_n_ = n;
    } else {
      DDP_CUDA_CHECK(cudnnBatchNormalizationForwardInference(
          ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, bn_desc_,
          gamma, beta, running_mean, running_var, static_cast<double>(g_.eps)));
    }
  }

  void backward(std::int64_t n, const float* x, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    if (n != last_train_n_)
      throw Error("internal: batch-norm backward without a matching training forward");
    set_shape(n);
    // beta factors 0: dx, dgamma and dbeta are overwritten, as on the CPU.
    DDP_CUDA_CHECK(cudnnBatchNormalizationBackward(
        ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_desc_, x, x_desc_,
        dy, x_desc_, dx, bn_desc_, gamma, dgamma, dbeta, static_cast<double>(g_.eps),
        saved_mean_.floats(), saved_inv_std_.floats()));
  }

 private:
  void set_shape(std::int64_t n) {
    if (n == shape_n_) return;
    set_tensor_4d(x_desc_, n, g_.c, g_.h, g_.w);
    shape_n_ = n;
  }

  std::shared_ptr<Context> ctx_;
  BatchNormGeom g_;
  TensorDesc x_desc_, bn_desc_;
  std::int64_t shape_n_ = -1;
  std::int64_t last_train_n_ = -1;
  DeviceBuffer saved_mean_, saved_inv_std_;  // of the last training forward
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(std::shared_ptr<Context> ctx, const BatchNormGeom& g) {
  return std::make_unique<BatchNorm>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
