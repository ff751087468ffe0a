#pragma once
// Identity (Dirac) initialisation of a convolution's weight: a layer that starts as the identity
// on (some of) its channels, so a deep stack of them starts as a short path (an implicit residual,
// as in airbench's network).
#include <cstdint>
#include <string>

#include "ddp/shape.hpp"

namespace ddp::nn {

// torch.nn.init.dirac_(w, groups) on a weight of `shape` [out, in/groups, kh, kw]: every value 0,
// then w[g * out/groups + d, d, kh/2, kw/2] = 1 for each group g and d < min(out/groups,
// in/groups). ConfigError naming `name` when the shape is not a convolution weight or out is not
// divisible by groups.
void dirac_init(float* w, const Shape& shape, std::int64_t groups, const std::string& name);

// airbench's partial identity, torch.nn.init.dirac_(w[:in/groups]): only the first
// min(out, in/groups) filters are set (as dirac_ with groups = 1 sets them), the rest keep what
// `w` holds.
void partial_dirac_init(float* w, const Shape& shape, const std::string& name);

}  // namespace ddp::nn
