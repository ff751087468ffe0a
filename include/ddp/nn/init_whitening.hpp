#pragma once
// Patch-whitening initialisation of a first convolution (airbench's init_whitening_conv): its
// filters are the eigenvectors of the (uncentred) covariance of the k x k patches of training
// images, each scaled by 1 / sqrt(eigenvalue + eps), in both signs, so the layer's outputs start
// decorrelated with unit variance. The arithmetic is here; which images, and which layer, the
// trainer decides (train/patch_whitening.hpp).
#include <cstdint>
#include <span>
#include <vector>

namespace ddp::nn {

// The eigen-decomposition of a symmetric n x n matrix `a` (row-major; only its upper triangle is
// read, as torch.linalg.eigh(UPLO='U') does), by cyclic Jacobi rotations in double precision.
// values: ascending (LAPACK's order); vectors: row i is the unit eigenvector of values[i]. An
// eigenvector's sign is arbitrary, so each is given the sign that makes its largest-magnitude
// entry positive (the first of equal ones).
struct SymmetricEigen {
  std::vector<double> values;
  std::vector<double> vectors;  // n x n, one eigenvector per row
};
SymmetricEigen symmetric_eigen(std::vector<double> a, std::int64_t n);

// Accumulates the patch covariance of images [n, c, h, w]: every k_h x k_w window at stride 1
// without padding, flattened in (channel, row, column) order as a convolution weight is.
class PatchCovariance {
 public:
  PatchCovariance(std::int64_t c, std::int64_t kh, std::int64_t kw);
  // Adds the patches of n images of c x h x w floats.
  void add(const float* images, std::int64_t n, std::int64_t h, std::int64_t w);
  std::int64_t dim() const { return dim_; }
  std::int64_t patches() const { return patches_; }
  // sum of p p^T / patches (dim x dim, row-major). Error when no patch was added.
  std::vector<double> covariance() const;

 private:
  std::int64_t c_, kh_, kw_, dim_;
  std::int64_t patches_ = 0;
  std::vector<double> sum_;  // upper triangle used
};

// The whitening filters [2 * dim, c, kh, kw] (row-major, a convolution weight) from a covariance:
// filter i < dim is eigenvector i in descending eigenvalue order divided by sqrt(eigenvalue + eps),
// filter dim + i its negative.
std::vector<float> whitening_filters(const std::vector<double>& covariance, std::int64_t dim,
                                     double eps);

}  // namespace ddp::nn
