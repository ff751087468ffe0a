#include "ddp/nn/init_dirac.hpp"

#include <algorithm>
#include <string>

#include "ddp/error.hpp"

namespace ddp::nn {
namespace {

void check_conv_weight(const Shape& shape, const std::string& name, const char* init) {
  if (shape.rank() != 4)
    throw ConfigError("model: init = \"" + std::string(init) + "\" takes a convolution weight " +
                      "[out, in, kh, kw]; '" + name + "' is " + shape.str() +
                      " (give the key to conv2d layers only)");
}

}  // namespace

void dirac_init(float* w, const Shape& shape, std::int64_t groups, const std::string& name) {
  check_conv_weight(shape, name, "dirac");
  if (groups < 1 || shape[0] % groups != 0)
    throw ConfigError("model: init = \"dirac\": '" + name + "' has " + std::to_string(shape[0]) +
                      " filters, not divisible by its " + std::to_string(groups) + " groups");
  const std::int64_t out_per_group = shape[0] / groups, in = shape[1], kh = shape[2], kw = shape[3];
  std::fill(w, w + shape.numel(), 0.0f);
  const std::int64_t diagonal = std::min(out_per_group, in);
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t d = 0; d < diagonal; ++d)
      w[(((g * out_per_group + d) * in + d) * kh + kh / 2) * kw + kw / 2] = 1.0f;
}

void partial_dirac_init(float* w, const Shape& shape, const std::string& name) {
  check_conv_weight(shape, name, "partial_dirac");
  const std::int64_t filters = std::min(shape[0], shape[1]);
  // The first filters are contiguous: dirac_ of that slice with one group.
  dirac_init(w, Shape{filters, shape[1], shape[2], shape[3]}, 1, name);
}

}  // namespace ddp::nn
