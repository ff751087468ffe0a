// The built-in datasets as pack sources, and the --format dispatch.
#include <fstream>

#include "../file_io.hpp"
#include "ddp/data/pack_source.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace fs = std::filesystem;

namespace {

// Class names from the text file the dataset ships (CIFAR's batches.meta.txt,
// fine_label_names.txt), when it is there and has one name per class; else "0", "1", ...
std::vector<std::string> listed_class_names(const fs::path& names_file, int classes) {
  std::vector<std::string> names;
  std::ifstream in(names_file);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  if (static_cast<int>(names.size()) == classes) return names;
  names.clear();
  for (int k = 0; k < classes; ++k) names.push_back(std::to_string(k));
  return names;
}

}  // namespace

PackSource load_builtin(const std::string& format, const fs::path& root, Split split) {
  SampleSet ds;
  std::vector<std::string> classes;
  const DatasetInfo& info = find_dataset(format);
  if (!info.builtin) throw ConfigError("internal: no built-in dataset '" + format + "'");
  Options opt;
  opt.dataset = format;
  opt.root = root.string();
  ds = info.read(opt, split);
  const int n = static_cast<int>(info.shape.classes);
  // Class names where the dataset ships them (or is known to have them), else "0".."n-1".
  if (format == "cifar10") {
    classes = listed_class_names(root / "batches.meta.txt", n);
  } else if (format == "cifar100") {
    classes = listed_class_names(root / "fine_label_names.txt", n);
  } else if (format == "fashion_mnist") {
    classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  } else {
    classes = listed_class_names({}, n);
  }
  PackSource src;
  src.description = format + (split == Split::train ? "-train:" : "-test:") +
                    fs::absolute(root).lexically_normal().string();
  src.classes = std::move(classes);
  src.channels = ds.channels();
  src.height = ds.height();
  src.width = ds.width();
  src.pixels.assign(ds.pixels().begin(), ds.pixels().end());
  src.labels.assign(ds.labels().begin(), ds.labels().end());
  return src;
}

PackSource load_pack_source(const std::string& format, const std::string& input, Split split,
                            const std::function<bool()>& cancelled) {
  if (format == "imagefolder") return list_image_folder(input, cancelled);
  if (format == "csv") return list_csv(input);
  if (format == "npy") {
    const auto comma = input.find(',');
    if (comma == std::string::npos || input.find(',', comma + 1) != std::string::npos)
      throw ConfigError("pack --format npy: --input '" + input +
                        "' must be two files, IMAGES.npy,LABELS.npy");
    return load_npy(input.substr(0, comma), input.substr(comma + 1));
  }
  std::string valid = "imagefolder, csv, npy";
  for (const std::string_view name : builtin_dataset_names()) {
    if (format == name) return load_builtin(format, input, split);
    valid += ", " + std::string(name);
  }
  throw ConfigError("pack: unknown --format '" + format + "'; expected " + valid);
}

}  // namespace ddp::data
