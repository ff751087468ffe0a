#pragma once
// The names of a dataset's classes, for per-class results and predictions: the standard names of
// the built-in datasets (as torchvision lists them) and, for packed files, the names the pack
// stored (its `classes` dataset).
#include <string>
#include <vector>

#include "ddp/data/options.hpp"

namespace ddp::data {

// One name per class, index = label. `classes` is the model's class count; a built-in list of
// another length (or a packed file without names) gives "0", "1", ... instead of wrong names.
std::vector<std::string> class_names(const Options& opt, int classes);

}  // namespace ddp::data
