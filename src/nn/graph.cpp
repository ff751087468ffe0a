#include "ddp/nn/graph.hpp"

#include <algorithm>
#include <map>

#include "layers/layer_util.hpp"

namespace ddp::nn {
namespace {

std::string names_text(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

GraphPlan plan_graph(const std::vector<std::unique_ptr<Layer>>& layers, const Shape& input) {
  if (layers.empty()) throw ConfigError("model: no layers");
  const std::size_t n = layers.size();
  GraphPlan plan;
  plan.inputs.resize(n);
  plan.consumers.assign(n, 0);
  plan.storage.assign(n, 0);

  std::map<std::string, int, std::less<>> index;  // names of the layers above
  for (std::size_t i = 0; i < n; ++i) {
    const Layer& layer = *layers[i];
    auto& in = plan.inputs[i];
    const auto& names = layer.spec().inputs;
    if (names.empty()) {
      in.push_back(static_cast<int>(i) - 1);  // the layer above; kModelInput for the first
    } else {
      for (const auto& name : names) {
        const auto it = index.find(name);
        if (it != index.end()) {
          in.push_back(it->second);
          continue;
        }
        if (name == layer.name())
          throw ConfigError("model: " + describe(layer) + " names itself as its input");
        for (std::size_t j = i + 1; j < n; ++j) {
          if (layers[j]->name() == name) {
            throw ConfigError("model: " + describe(layer) + " reads '" + name +
                              "', which comes after it (" + describe(*layers[j]) +
                              "); a layer may only read layers above it, so the file order is "
                              "the order of computation and there are no cycles");
          }
        }
        // The nearest layers above are the likely intended ones.
        std::vector<std::string> near;
        for (std::size_t j = i; j-- > 0 && near.size() < 6;) near.push_back(layers[j]->name());
        throw ConfigError("model: " + describe(layer) + ": input '" + name +
                          "' is not the name of a layer above it" +
                          (near.empty() ? std::string(" (it is the first layer)")
                                        : " (the nearest above: " + names_text(near) + ")"));
      }
    }
    if (in.size() < layer.min_inputs() || in.size() > layer.max_inputs()) {
      const auto lo = layer.min_inputs(), hi = layer.max_inputs();
      const std::string want = lo == hi         ? std::to_string(lo)
                               : hi == SIZE_MAX ? "at least " + std::to_string(lo)
                                                : std::to_string(lo) + " to " + std::to_string(hi);
      throw ConfigError(
          "model: " + describe(layer) + " takes " + want + " input" + (hi == 1 ? "" : "s") +
          ", got " + std::to_string(in.size()) +
          (names.empty() ? " (name them with inputs = [\"A\", \"B\"])" : ": " + names_text(names)));
    }
    std::vector<Shape> shapes;
    for (int p : in) {
      shapes.push_back(p == kModelInput ? input : plan.out_shapes[static_cast<std::size_t>(p)]);
      if (p != kModelInput) ++plan.consumers[static_cast<std::size_t>(p)];
    }
    plan.out_shapes.push_back(layers[i]->infer(shapes));
    if (!index.emplace(layer.name(), static_cast<int>(i)).second)
      throw ConfigError("model: " + describe(layer) + ": the name '" + layer.name() +
                        "' is used by a layer above; layer names must be unique");
  }

  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (plan.consumers[i] == 0) {
      throw ConfigError("model: the output of " + describe(*layers[i]) +
                        " is not read by any layer; only the last layer's output may be left "
                        "unused (the logits). Name it in a later layer's input/inputs, or remove "
                        "it");
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    const Layer& layer = *layers[i];
    const int p = plan.inputs[i][0];
    plan.storage[i] = static_cast<int>(i);
    if (layer.is_view()) {
      plan.storage[i] = p == kModelInput ? kModelInput : plan.storage[static_cast<std::size_t>(p)];
    } else if (layer.can_run_in_place()) {
      // An input's buffer may be overwritten when nothing else reads it and its producer's
      // backward does not need it; the first such input of the first two is taken (an add over
      // its first or second input sums in the order it would out of place). The model input is
      // the caller's, and a view's buffer holds another layer's output. The producer may itself
      // run in place (batch norm -> add -> ReLU share one buffer): every layer on that buffer
      // passed this test when it took it, and having overwritten its input, it cannot need it.
      const std::size_t candidates = std::min<std::size_t>(2, plan.inputs[i].size());
      for (std::size_t k = 0; k < candidates; ++k) {
        const int q = plan.inputs[i][k];
        if (q == kModelInput) continue;
        const auto qq = static_cast<std::size_t>(q);
        if (!layers[qq]->is_view() && plan.consumers[qq] == 1 &&
            !layers[qq]->backward_reads_output()) {
          plan.storage[i] = plan.storage[qq];
          break;
        }
      }
    }
  }
  return plan;
}

}  // namespace ddp::nn
