#include "ddp/nn/layer_factory.hpp"

#include "ddp/error.hpp"
#include "ddp/nn/layer_registry.hpp"

namespace ddp::nn {

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, backend::Backend& be) {
  if (const LayerType* t = find_layer_type(spec.type)) return t->make(spec, be);
  std::string known;
  for (const auto& t : layer_registry()) known += (known.empty() ? "" : ", ") + std::string(t.type);
  throw ConfigError("model: layer '" + spec.name + "' has unknown type '" + spec.type +
                    "' (known: " + known + ")");
}

}  // namespace ddp::nn
