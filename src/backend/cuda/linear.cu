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
#include "kernels.cuh"
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
    if (const Half* hf = ctx_->half()) {
      const void* wh = to_half(1, *hf, w, g_.out * g_.in);
      const void* xh = to_half(0, *hf, x, n * g_.in);
      gemm_half(CUBLAS_OP_T, CUBLAS_OP_N, out_, nn, in_, wh, in_, xh, in_, y, out_);
    } else {
      DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out_, nn, in_, &kOne, w, in_, x, in_,
                                 &kZero, y, out_));
    }
    if (g_.bias)
      DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, out_, nn, 1, &kOne, b, out_,
                                 ctx_->ones(n), 1, &kOne, y, out_));
  }

  void backward(std::int64_t n, const float* x, const float* w, const float* dy, float* dx,
                float* dw, float* db) override {
    const int nn = to_int(n, "batch");
    cublasHandle_t h = ctx_->cublas();
    if (const Half* hf = ctx_->half()) {
      // Reduced-precision inputs, fp32 products out: dW and dx need no conversion back.
      const void* xh = to_half(0, *hf, x, n * g_.in);
      const void* dyh = to_half(2, *hf, dy, n * g_.out);
      gemm_half(CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, nn, xh, in_, dyh, out_, dw, in_);
      if (dx) {
        const void* wh = to_half(1, *hf, w, g_.out * g_.in);
        gemm_half(CUBLAS_OP_N, CUBLAS_OP_N, in_, nn, out_, wh, in_, dyh, out_, dx, in_);
      }
    } else {
      DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, nn, &kOne, x, in_, dy,
                                 out_, &kZero, dw, in_));
      if (dx)
        DDP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in_, nn, out_, &kOne, w, in_, dy,
                                   out_, &kZero, dx, in_));
    }
    if (g_.bias)
      DDP_CUDA_CHECK(
          cublasSgemv(h, CUBLAS_OP_N, out_, nn, &kOne, dy, out_, ctx_->ones(n), 1, &kZero, db, 1));
  }

 private:
  // `count` floats rounded into scratch slot `slot`.
  const void* to_half(int slot, Half hf, const float* x, std::int64_t count) {
    void* out = ctx_->half_scratch(slot, count);
    launch_to_half(ctx_->stream(), hf, count, x, out);
    return out;
  }
  // C (fp32) = op(A) op(B) with 16-bit A and B, accumulated in fp32 (tensor cores).
  void gemm_half(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a,
                 int lda, const void* b, int ldb, float* c, int ldc) {
    const cudaDataType_t t = ctx_->half_cublas();
    DDP_CUDA_CHECK(cublasGemmEx(ctx_->cublas(), ta, tb, m, n, k, &kOne, a, t, lda, b, t, ldb,
                                &kZero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<Context> ctx_;
  LinearGeom g_;
  int in_, out_;
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(std::shared_ptr<Context> ctx, const LinearGeom& g) {
  return std::make_unique<Linear>(std::move(ctx), g);
}

}  // namespace ddp::backend::cuda
