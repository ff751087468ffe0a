#pragma once
// What `ddp_train pack` packs: a list of image files with labels (image folders, CSV lists), or
// decoded arrays (NumPy files, the built-in CIFAR/MNIST readers). Sample order is the list's.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ddp/data/readers.hpp"

namespace ddp::data {

struct SourceFile {
  std::filesystem::path path;
  std::int32_t label = 0;
  std::string where;  // where it was listed, for messages: "line 12 of 'list.csv'", or ""
};

struct PackSource {
  std::string description;  // the packed file's `source` attribute, e.g. "imagefolder:/data/x"
  std::vector<std::string> classes;
  // Either files to decode ...
  std::vector<SourceFile> files;
  // ... or decoded arrays: labels.size() samples of channels x height x width, CHW.
  std::int64_t channels = 0, height = 0, width = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::int32_t> labels;
  // What the listing left out and why (symbolic-link loops, files that are not images), for the
  // summary.
  std::vector<std::string> notes;

  bool is_files() const { return labels.empty(); }
  std::int64_t size() const {
    return is_files() ? static_cast<std::int64_t>(files.size())
                      : static_cast<std::int64_t>(labels.size());
  }
};

// PATH/<class>/<image>, in torchvision.datasets.ImageFolder's order (image_folder.cpp).
// `cancelled` (polled while walking) stops the listing with a DataError when it returns true.
PackSource list_image_folder(const std::filesystem::path& root,
                             const std::function<bool()>& cancelled = {});
// Rows path,label (csv_list.cpp).
PackSource list_csv(const std::filesystem::path& csv);
// images.npy + labels.npy (npy_file.cpp).
PackSource load_npy(const std::filesystem::path& images, const std::filesystem::path& labels);
// cifar10 | cifar100 | mnist | fashion_mnist through the existing readers (pack_sources.cpp).
PackSource load_builtin(const std::string& format, const std::filesystem::path& root, Split split);

// Dispatch on --format; `input` is a path, or "images.npy,labels.npy" for npy.
PackSource load_pack_source(const std::string& format, const std::string& input, Split split,
                            const std::function<bool()>& cancelled = {});

}  // namespace ddp::data
