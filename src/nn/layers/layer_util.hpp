#pragma once
// Helpers shared by the layer implementations: error messages that name the layer.
#include <string>

#include "ddp/error.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

inline std::string describe(const Layer& l) {
  std::string s = "layer '" + l.name() + "' (" + l.spec().type;
  if (l.spec().line > 0) s += ", config line " + std::to_string(l.spec().line);
  return s + ")";
}

[[noreturn]] inline void shape_error(const Layer& l, const Shape& in, const std::string& why) {
  throw ConfigError("model: " + describe(l) + " cannot take input " + in.str() + ": " + why);
}

inline std::int64_t pooled_extent(std::int64_t in, std::int64_t k, std::int64_t stride,
                                  std::int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace ddp::nn
