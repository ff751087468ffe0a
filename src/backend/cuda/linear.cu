// Fully connected layers on cuBLAS: y = x W^T + b with x [n, in], W [out, in] (PyTorch's
// nn.Linear layout), y [n, out], all row-major.
//
// cuBLAS is column-major, and a row-major [r, c] matrix is the column-major [c, r] matrix (its
// transpose) with leading dimension c. So, in column-major terms, with x^T [in, n], W^T [in, out],
// y^T [out, n], dy^T [out, n]:
//   forward   y^T  [out, n]  = W   x^T  : gemm(T, N, m=out, n=n,   k=in,  A=W  lda=in,  B=x ldb=in)
//   weights   dW^T [in, out] = x^T dy   : gemm(N, T, m=in,  n=out, k=n,   A=x  lda=in,  B=dy
//   ldb=out) data      dx^T [in, n]   = W^T dy^T : gemm(N, N, m=in,  n=n,   k=out, A=W  lda=in,
//   B=dy ldb=out) bias      db   [out]     = dy^T 1_n : gemv(N, m=out, n=n, A=dy lda=out, x=ones)
// The bias is added by a rank-1 update y^T += b 1_n^T (a k = 1 GEMM) after the product.
#include "ops.hpp"

namespace ddp::backend::cuda {
namespace {

class Linear final : public LinearOp {
 public:
  Linear(std::shared_ptr<Context> ctx, const LinearGeom& g)
      : ctx_(std::move(ctx)),
        g_(g),
        in_(to_int(g.in, "in_features")),
        out_(to_int(g.out, "out_features")) {}

  void forward(std::int64_t n, const float* x, const float* w, const float* b, float* y) override {
    const int nn = to_int(n, "batch");
    cublasHandle_t h = ctx_->cublas();
    DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out_, nn, in_, &kOne, w, in_, x, in_,
                               &kZero, y, out_));
    if (g_.bias)
      DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, out_, nn, 1, &kOne, b, out_,
                                 ctx_->ones(n), 1, &kOne, y, out_));
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    const int nn = to_int(n, "batch");
    cublasHandle_t h = ctx_->cublas();
    DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, nn, &kOne, x, in_, dy, out_,
                               &kZero, dw, in_));
    if (g_.bias)
      DDP_CUDA_CHECK(
          cublasSgemv(h, CUBLAS_OP_N, out_, nn, &kOne, dy, out_, ctx_->ones(n), 1, &kZero, db, 1));
    if (dx)
      DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in_, nn, out_, &kOne, w, in_, dy,
                                 out_, &kZero, dx, in_));
  }

 private:
  std::shared_ptr<Context> ctx_;
  LinearGeom g_;
  int in_, out_;
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(std::shared_ptr<Context> ctx, const LinearGeom& g) {
  return std::make_unique<Linear>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
