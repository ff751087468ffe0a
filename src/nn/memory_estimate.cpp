#include "ddp/nn/memory_estimate.hpp"

#include <memory>

#include "ddp/error.hpp"
#include "ddp/nn/layer_factory.hpp"

namespace ddp::nn {
namespace {

double floats(const std::vector<ParamSpec>& specs) {
  double n = 0;
  for (const auto& s : specs) {
    double e = 1;
    for (const auto d : s.shape.dims()) e *= static_cast<double>(d);
    n += e;
  }
  return n;
}

}  // namespace

double MemoryEstimate::params() const {
  double n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}
double MemoryEstimate::buffers() const {
  double n = 0;
  for (const auto& l : layers) n += l.buffers;
  return n;
}
double MemoryEstimate::activations_per_sample() const {
  double n = 0;
  for (const auto& l : layers) n += l.activations;
  return n;
}

MemoryEstimate estimate_memory(const std::vector<LayerSpec>& specs, const Shape& input,
                               backend::Backend& be) {
  if (specs.empty()) throw ConfigError("model: no layers");
  MemoryEstimate est;
  std::vector<std::unique_ptr<Layer>> layers;
  Shape shape = input;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    layers.push_back(make_layer(specs[i], be));
    Layer& layer = *layers.back();
    shape = layer.infer(shape);
    LayerFootprint f;
    f.params = floats(layer.param_specs());
    f.buffers = floats(layer.buffer_specs());
    // Model::reserve: a view owns nothing; an in-place layer shares the buffers of the one below
    // (Model::runs_in_place); every other layer holds its output and the output's gradient.
    const bool in_place = i > 0 && layer.can_run_in_place() && !layers[i - 1]->is_view() &&
                          !layers[i - 1]->backward_reads_output();
    if (!layer.is_view() && !in_place) {
      double per_sample = 1;
      for (const auto d : shape.dims()) per_sample *= static_cast<double>(d);
      f.activations = 2 * per_sample;
    }
    est.layers.push_back(f);
  }
  return est;
}

}  // namespace ddp::nn
