#pragma once
// Helpers shared by the layer implementations: error messages that name the layer.
#include <span>
#include <string>

#include "ddp/error.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

inline std::string describe(const Layer& l) {
  std::string s = "layer '" + l.name() + "' (" + l.spec().type;
  if (!l.spec().file.empty())
    s += ", " + l.spec().file + ":" + std::to_string(l.spec().line);
  else if (l.spec().line > 0)
    s += ", config line " + std::to_string(l.spec().line);
  return s + ")";
}

[[noreturn]] inline void shape_error(const Layer& l, const Shape& in, const std::string& why) {
  throw ConfigError("model: " + describe(l) + " cannot take input " + in.str() + ": " + why);
}

// For layers with several inputs: every input's name and shape in the message.
[[noreturn]] inline void inputs_error(const Layer& l, std::span<const Shape> in,
                                      const std::string& why) {
  std::string shapes;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const auto& names = l.spec().inputs;
    shapes += (k ? ", " : "") +
              (k < names.size() ? "'" + names[k] + "'" : "input " + std::to_string(k)) + " " +
              in[k].str();
  }
  throw ConfigError("model: " + describe(l) + ": " + why + "; got " + shapes);
}

// A weight's and a bias's initialisation for spec.init ("" = the layer's PyTorch default; see
// LayerSpec::init).
inline Init init_weight(const LayerSpec& spec, Init pytorch_default) {
  if (spec.init == "kaiming_normal") return Init::kaiming_normal_fan_out;
  if (spec.init == "normal") return Init::normal_001;
  if (spec.init == "zeros") return Init::zeros;
  if (spec.init == "dirac") return Init::dirac;
  if (spec.init == "partial_dirac") return Init::partial_dirac;
  if (spec.init == "patch_whitening") return Init::patch_whitening;
  return pytorch_default;
}
inline Init init_bias(const LayerSpec& spec, Init pytorch_default) {
  return spec.init.empty() ? pytorch_default : Init::zeros;
}

inline std::int64_t pooled_extent(std::int64_t in, std::int64_t k, std::int64_t stride,
                                  std::int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace ddp::nn
