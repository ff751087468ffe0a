#include "ddp/nn/memory_estimate.hpp"

#include <memory>

#include "ddp/error.hpp"
#include "ddp/nn/graph.hpp"
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
  for (const auto& spec : specs) layers.push_back(make_layer(spec, be));
  const GraphPlan plan = plan_graph(layers, input);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = *layers[i];
    LayerFootprint f;
    f.params = floats(layer.param_specs());
    f.buffers = floats(layer.buffer_specs());
    // GraphExecutor::reserve: a view or an in-place layer owns nothing; every other layer holds its
    // output, and its output's gradient at most (gradient buffers are shared by liveness).
    if (plan.owns_storage(i)) {
      double per_sample = 1;
      for (const auto d : plan.out_shapes[i].dims()) per_sample *= static_cast<double>(d);
      f.activations = 2 * per_sample;
    }
    est.layers.push_back(f);
  }
  return est;
}

}  // namespace ddp::nn
