#pragma once
// The snapshot layout (docs/snapshot_format.md): the groups, and how the model's named tensors map
// onto /model/<layer>/<param>. What /meta and /optimizer hold is the field table's
// (snapshot_fields.hpp).
#include <string>
#include <vector>

#include "ddp/nn/model.hpp"

namespace ddp::ckpt::layout {

inline constexpr const char* kModel = "/model";
inline constexpr const char* kOptimizer = "/optimizer";
inline constexpr const char* kMeta = "/meta";
inline constexpr const char* kEma = "/ema";  // the moving average's tensors, laid out as /model
// The attribute of /meta a reader checks before anything else; the other attributes and texts of
// /meta and /optimizer are rows of the field table (snapshot_fields.hpp).
inline constexpr const char* kFormatVersion = "format_version";

// One tensor of the model as the snapshot names it.
struct Entry {
  std::string name;   // "conv1.weight", as Model names it
  std::string layer;  // "conv1": the group
  std::string leaf;   // "weight": the dataset
  const nn::NamedTensor* tensor;
  bool is_param;  // false for buffers (batch-norm running statistics): no optimizer state
};

// The model's parameters and buffers in model order (each layer's parameters, then its buffers).
// Throws ConfigError for a layer name that cannot be an HDF5 group name.
std::vector<Entry> model_entries(const nn::Model& model);

inline std::string join(const std::string& group, const std::string& leaf) {
  return group + "/" + leaf;
}

}  // namespace ddp::ckpt::layout
