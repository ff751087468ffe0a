#pragma once
// What a layer type's ONNX export (LayerType::onnx) writes into: nodes over named values, with the
// layer's parameters and constants as initializers. nn/onnx_export.cpp implements it on the ONNX
// project's protobuf classes, which the layers' files never include.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ddp/nn/layer_spec.hpp"

namespace ddp::nn {

using OnnxAttrValue = std::variant<std::int64_t, float, std::vector<std::int64_t>>;
struct OnnxAttr {
  std::string name;
  OnnxAttrValue value;
};

class OnnxLayer {
 public:
  virtual const LayerSpec& spec() const = 0;
  // The values the layer reads: "input" or the outputs of the layers above, in its input order.
  virtual const std::vector<std::string>& inputs() const = 0;
  // The value the layer's last node must write (the layers above read it). Intermediate values
  // are named output() + "/what".
  virtual const std::string& output() const = 0;
  // A parameter or buffer of the layer as an initializer, by its suffix ("weight",
  // "running_mean"); "" when the layer has none of that name.
  virtual std::string weight(const std::string& suffix) = 0;
  // A float scalar initializer named `name`; returns the name.
  virtual std::string scalar(const std::string& name, float value) = 0;
  // Adds node `op` (named output + "/" + op) reading `inputs` and writing `output`.
  virtual void node(const std::string& op, const std::vector<std::string>& inputs,
                    const std::string& output, const std::vector<OnnxAttr>& attrs) = 0;
  void node(const std::string& op, const std::vector<std::string>& inputs,
            const std::string& output) {
    node(op, inputs, output, {});
  }

 protected:
  ~OnnxLayer() = default;
};

// ONNX's [h, w] of an extent, and its pads [h_begin, w_begin, h_end, w_end] (symmetric padding).
inline std::vector<std::int64_t> onnx_pair(const Extent2& e) {
  return {e.h, e.w};
}
inline std::vector<std::int64_t> onnx_pads(const Extent2& e) {
  return {e.h, e.w, e.h, e.w};
}

}  // namespace ddp::nn
