#include "ddp/nn/init_whitening.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "ddp/error.hpp"

namespace ddp::nn {

SymmetricEigen symmetric_eigen(std::vector<double> a, std::int64_t n) {
  if (n < 1 || static_cast<std::int64_t>(a.size()) != n * n)
    throw Error("internal: symmetric_eigen of " + std::to_string(a.size()) + " values as " +
                std::to_string(n) + " x " + std::to_string(n));
  const auto at = [n](std::vector<double>& m, std::int64_t r, std::int64_t c) -> double& {
    return m[static_cast<std::size_t>(r * n + c)];
  };
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t q = p + 1; q < n; ++q) at(a, q, p) = at(a, p, q);
  std::vector<double> v(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) at(v, i, i) = 1.0;
  double total = 0.0;
  for (const double x : a) total += x * x;

  // Cyclic Jacobi: each rotation zeroes one off-diagonal pair; sweeps converge quadratically.
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t q = p + 1; q < n; ++q) off += at(a, p, q) * at(a, p, q);
    if (off <= 1e-32 * total || off == 0.0) break;
    for (std::int64_t p = 0; p < n; ++p) {
      for (std::int64_t q = p + 1; q < n; ++q) {
        const double apq = at(a, p, q);
        if (apq == 0.0) continue;
        const double theta = (at(a, q, q) - at(a, p, p)) / (2.0 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::hypot(theta, 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        // A = J^T A J with J the rotation in the (p, q) plane; V = V J.
        for (std::int64_t k = 0; k < n; ++k) {
          const double akp = at(a, k, p), akq = at(a, k, q);
          at(a, k, p) = c * akp - s * akq;
          at(a, k, q) = s * akp + c * akq;
        }
        for (std::int64_t k = 0; k < n; ++k) {
          const double apk = at(a, p, k), aqk = at(a, q, k);
          at(a, p, k) = c * apk - s * aqk;
          at(a, q, k) = s * apk + c * aqk;
        }
        for (std::int64_t k = 0; k < n; ++k) {
          const double vkp = at(v, k, p), vkq = at(v, k, q);
          at(v, k, p) = c * vkp - s * vkq;
          at(v, k, q) = s * vkp + c * vkq;
        }
      }
    }
  }

  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t x, std::int64_t y) { return at(a, x, x) < at(a, y, y); });
  SymmetricEigen out;
  out.values.resize(static_cast<std::size_t>(n));
  out.vectors.resize(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t col = order[static_cast<std::size_t>(i)];
    out.values[static_cast<std::size_t>(i)] = at(a, col, col);
    std::int64_t largest = 0;
    for (std::int64_t k = 1; k < n; ++k)
      if (std::abs(at(v, k, col)) > std::abs(at(v, largest, col))) largest = k;
    const double sign = at(v, largest, col) < 0 ? -1.0 : 1.0;
    for (std::int64_t k = 0; k < n; ++k)
      out.vectors[static_cast<std::size_t>(i * n + k)] = sign * at(v, k, col);
  }
  return out;
}

PatchCovariance::PatchCovariance(std::int64_t c, std::int64_t kh, std::int64_t kw)
    : c_(c), kh_(kh), kw_(kw), dim_(c * kh * kw), sum_(static_cast<std::size_t>(dim_ * dim_)) {}

void PatchCovariance::add(const float* images, std::int64_t n, std::int64_t h, std::int64_t w) {
  if (h < kh_ || w < kw_)
    throw Error("internal: " + std::to_string(h) + "x" + std::to_string(w) +
                " images are smaller than the " + std::to_string(kh_) + "x" + std::to_string(kw_) +
                " patches");
  const auto d = static_cast<std::size_t>(dim_);
  std::vector<double> p(d);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* img = images + i * c_ * h * w;
    for (std::int64_t y = 0; y + kh_ <= h; ++y) {
      for (std::int64_t x = 0; x + kw_ <= w; ++x) {
        std::size_t k = 0;
        for (std::int64_t ch = 0; ch < c_; ++ch)
          for (std::int64_t r = 0; r < kh_; ++r)
            for (std::int64_t s = 0; s < kw_; ++s)
              p[k++] = static_cast<double>(img[(ch * h + y + r) * w + x + s]);
        for (std::size_t a = 0; a < d; ++a) {
          double* row = sum_.data() + a * d;
          const double pa = p[a];
          for (std::size_t b = a; b < d; ++b) row[b] += pa * p[b];
        }
        ++patches_;
      }
    }
  }
}

std::vector<double> PatchCovariance::covariance() const {
  if (patches_ == 0) throw Error("internal: a patch covariance of no patches");
  const auto d = static_cast<std::size_t>(dim_);
  std::vector<double> cov(d * d);
  const double inv = 1.0 / static_cast<double>(patches_);
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = a; b < d; ++b) cov[a * d + b] = cov[b * d + a] = sum_[a * d + b] * inv;
  return cov;
}

std::vector<float> whitening_filters(const std::vector<double>& covariance, std::int64_t dim,
                                     double eps) {
  const SymmetricEigen e = symmetric_eigen(covariance, dim);
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> w(2 * d * d);
  for (std::size_t i = 0; i < d; ++i) {
    const std::size_t src = d - 1 - i;  // descending eigenvalues, as airbench flips eigh's order
    const double denom = e.values[src] + eps;
    if (!(denom > 0))
      throw Error("patch whitening: eigenvalue " + std::to_string(e.values[src]) +
                  " + eps is not positive; raise model.whitening_eps");
    const double scale = 1.0 / std::sqrt(denom);
    for (std::size_t k = 0; k < d; ++k) {
      const double v = e.vectors[src * d + k] * scale;
      w[i * d + k] = static_cast<float>(v);
      w[(d + i) * d + k] = static_cast<float>(-v);
    }
  }
  return w;
}

}  // namespace ddp::nn
