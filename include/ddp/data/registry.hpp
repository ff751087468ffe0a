#pragma once
// The one list of datasets `data.dataset` names: what config (choices, the model's shape), doctor,
// pack and the readers all look up, so a dataset is added in one place (registry.cpp).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// What a model is built for: the classes and the images of a dataset.
struct DatasetShape {
  std::int64_t classes = 0, channels = 0, height = 0, width = 0;
};

struct DatasetInfo {
  std::string_view name;  // the data.dataset value
  // Fixed by the format; all 0 for a dataset whose files say (packed).
  DatasetShape shape;
  bool builtin = true;  // read from data.root (and `ddp_train pack --format NAME` takes it)
  SampleSet (*read)(const Options&, Split) = nullptr;
  // Reads only the samples a limit keeps (fixed-size records); nullptr: read, then limit.
  LimitedSet (*read_limited)(const Options&, Split, const Limit&) = nullptr;
};

// Every dataset, built-ins first.
std::span<const DatasetInfo> datasets();
// The names in registry order ("cifar10", ..., "packed").
std::vector<std::string_view> dataset_names();
// The built-in names (those `pack --format` repacks).
std::vector<std::string_view> builtin_dataset_names();
// The entry named `name`; an unknown name is a DataError listing the valid names and suggesting
// the one meant when only case, '-' or '_' differ ("CIFAR-10", "fashion-mnist").
const DatasetInfo& find_dataset(std::string_view name);
// The shape the model is built for: the registry's for a built-in, the training file's header
// for packed files (any class count and image size).
DatasetShape dataset_shape(const Options& opt);

}  // namespace ddp::data
