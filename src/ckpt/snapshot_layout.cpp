#include "snapshot_layout.hpp"

#include "ddp/error.hpp"

namespace ddp::ckpt::layout {
namespace {

// '/' separates HDF5 groups and "." names the current one; the config accepts both in layer
// names, so refuse here with a message rather than write a file that reads back differently.
void check_layer_name(const std::string& name) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos)
    throw ConfigError("layer name '" + name +
                      "' cannot be stored in a snapshot (HDF5 group names must be non-empty, "
                      "not '.', and without '/'); rename the layer");
}

}  // namespace

std::vector<Entry> model_entries(const nn::Model& model) {
  std::vector<Entry> out;
  for (std::size_t li = 0; li < model.num_layers(); ++li) {
    const std::string& layer = model.layer(li).name();
    bool checked = false;
    auto add = [&](const std::vector<nn::NamedTensor>& tensors, bool is_param) {
      for (const auto& t : tensors) {
        if (t.layer != li) continue;
        if (!checked) check_layer_name(layer);
        checked = true;
        // Model names tensors "<layer>.<suffix>".
        out.push_back({t.name, layer, t.name.substr(layer.size() + 1), &t, is_param});
      }
    };
    add(model.named_params(), true);
    add(model.named_buffers(), false);
  }
  return out;
}

}  // namespace ddp::ckpt::layout
