#pragma once
// Finite-difference gradient checking for layers.
//
// Tolerance: the kernels compute in float32, so the check perturbs by eps = 1e-2 and compares
// central differences of L = sum(y * r) (accumulated in double) with the analytic gradient. For the
// piecewise-linear layers (conv, linear, pooling, relu, dropout) the central difference is exact up
// to rounding (~1e-7 * |L| / eps ~ 1e-4 relative); batch norm and softmax are smooth, so the
// truncation error is O(eps^2) ~ 1e-4. We require the max abs error to be below 2e-2 of the largest
// gradient magnitude (and 1e-3 absolute), which a wrong formula (sign, transposition, missing
// term, scale) fails by orders of magnitude.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "ddp/rng.hpp"

namespace ddp::testing {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  CounterRng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.next_float();
  return v;
}

// Compares analytic gradient `grad` of scalar function f(values) with central differences,
// perturbing values[i] in place.
inline void expect_gradient_matches(const std::function<double()>& f, std::vector<float>& values,
                                    const std::vector<float>& grad, const char* what,
                                    float eps = 1e-2f, double rel_tol = 2e-2) {
  ASSERT_EQ(values.size(), grad.size());
  double max_grad = 1e-3, max_err = 0.0;
  std::size_t worst = 0;
  std::vector<double> numeric(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float orig = values[i];
    values[i] = orig + eps;
    const double fp = f();
    values[i] = orig - eps;
    const double fm = f();
    values[i] = orig;
    numeric[i] = (fp - fm) / (2.0 * static_cast<double>(eps));
    max_grad = std::max(max_grad, std::abs(static_cast<double>(grad[i])));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double err = std::abs(numeric[i] - grad[i]);
    if (err > max_err) {
      max_err = err;
      worst = i;
    }
  }
  EXPECT_LE(max_err, rel_tol * max_grad)
      << what << ": worst element " << worst << " analytic " << grad[worst] << " numeric "
      << numeric[worst] << " (max |grad| " << max_grad << ")";
}

}  // namespace ddp::testing
