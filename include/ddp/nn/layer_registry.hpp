#pragma once
// Every layer type describes itself once, in its own file under src/nn/layers/ (Caffe's
// REGISTER_LAYER_CLASS is the model): its name in the config, the prefix of its default names, a
// line of documentation, the [[model.layers]] keys it takes with the values each allows, its checks
// of a whole entry, its factory (the Layer subclass there does shape inference, forward and
// backward) and its ONNX export. make_layer, default names, the config schema's layer keys,
// `ddp_train layers` and the ONNX exporter all read this registry; nothing else lists layer types.
//
// Registration. The file src/nn/layers/NAME.cpp defines
//
//   namespace ddp::nn::registered { std::vector<LayerType> layer_types_NAME(); }
//
// returning the types it holds, and the build calls every such function: cmake/LayerTypes.cmake
// writes their list from the file names present (a new file is picked up by the glob's
// CONFIGURE_DEPENDS). An explicit list, not self-registering static objects: ddp_core is a static
// library, and a linker keeps an object file of it only when something references it, so a binary
// linking ddp_core normally (the benchmarks, torch_parity_step) would silently lose every type
// whose file nothing else reached; the generated list references them all, so every binary has
// every type, and the order of static initialisation never matters (the registry is built on first
// use). A file without its function is a link error naming it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

class OnnxLayer;  // nn/onnx_layer.hpp

// Numeric bounds of a key (of each value of [h, w]); an unset side is unbounded.
struct KeyRange {
  std::optional<double> lo = std::nullopt, hi = std::nullopt;
  bool lo_open = false;  // lo itself excluded
  bool hi_open = false;
};

// One [[model.layers]] key a layer type takes. Types that share a key (kernel: conv2d and the
// pools) share its definition (src/nn/layers/shared_keys.hpp); the config schema refuses two
// different definitions of one name.
struct LayerKeyDef {
  std::string_view name;  // "kernel"
  LayerField (*field)(LayerSpec&) = nullptr;
  std::string_view help = "";  // one line, for `ddp_train layers`
  KeyRange range = {};
  std::vector<std::string_view> choices = {};  // strings: the allowed values (empty: any)
};

// DDP_SPEC_FIELD(kernel): the key's name and its LayerSpec field in one go, so the two cannot
// diverge.
#define DDP_SPEC_FIELD(key) \
  .name = #key, .field = [](::ddp::nn::LayerSpec& s) -> ::ddp::nn::LayerField { return &s.key; }

// Why an entry is refused as a whole, beyond each key's own range: the key to point at (its line
// in the config file) and what is wrong ("padding = 2: must be at most kernel / 2 (kernel = 3)").
struct SpecProblem {
  std::string key;
  std::string message;
};

struct LayerType {
  std::string_view type;    // "conv2d"
  std::string_view family;  // default names: family + ordinal ("conv1"); shared by maxpool/avgpool
  std::string_view doc;     // one line
  // Where `ddp_train layers` and the list of types put it, ascending. The built-in types use a
  // hundred per group: 100 convolution, 200 linear, 300 normalisation, 400 activations, 500
  // pooling, 600 reshaping, 700 regularisation, 800 merging.
  int order = 0;
  std::vector<LayerKeyDef> keys = {};           // besides type, name, input, inputs
  std::vector<std::string_view> required = {};  // names of keys that must be given
  std::unique_ptr<Layer> (*make)(const LayerSpec&, backend::Backend&) = nullptr;
  // Writes the layer's nodes (nn/onnx_layer.hpp), in inference form.
  void (*onnx)(OnnxLayer&) = nullptr;
  // Checks of the entry as a whole, when it is read from a config (nullptr: none).
  std::optional<SpecProblem> (*check)(const LayerSpec&) = nullptr;
};

// A LayerType factory for a Layer subclass constructed from (spec, backend): .make =
// make_layer_of<Conv2d>.
template <class L>
std::unique_ptr<Layer> make_layer_of(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<L>(spec, be);
}

// Every registered type, in `order`. Throws Error (an internal error) on first use when two
// registrations clash (a type twice, a required key it does not take, no factory or export).
const std::vector<LayerType>& layer_registry();
const LayerType* find_layer_type(std::string_view type);  // nullptr when unknown

// Names every unnamed layer after its type's family and its ordinal within that family (conv1,
// relu2, fc3).
void assign_default_names(std::vector<LayerSpec>& layers);

}  // namespace ddp::nn
