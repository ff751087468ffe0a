#include "ddp/data/registry.hpp"

#include <array>
#include <cctype>
#include <filesystem>

#include "../file_io.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/data/packed_reader.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace fs = std::filesystem;

namespace {

const char* split_key(Split split) {
  return split == Split::train ? "data.train_file" : "data.test_file";
}

// Fashion-MNIST's root, or a DataError that says where Debian's package puts it.
void check_fashion_root(const Options& opt) {
  std::error_code ec;
  const fs::path root = opt.root, debian = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(root, ec)) {
    // The commonest fix: point at the copy Debian's package installs.
    throw DataError("Fashion-MNIST directory " + detail::quoted(root) + " does not exist; " +
                    (fs::is_directory(debian, ec)
                         ? "a copy (Debian's dataset-fashion-mnist package) is installed at " +
                               debian.string() + ": set the data root there"
                         : "install one with `apt-get install dataset-fashion-mnist` (it goes "
                           "to " +
                               debian.string() +
                               ") or download the four "
                               "{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz files") +
                    detail::missing_root_advice(root));
  }
}

SampleSet read_fashion(const Options& opt, Split split) {
  check_fashion_root(opt);
  return read_mnist_dir(opt.root, split);
}

LimitedSet read_fashion_limited(const Options& opt, Split split, const Limit& limit) {
  check_fashion_root(opt);
  return read_mnist_dir(opt.root, split, limit);
}

SampleSet read_packed_split(const Options& opt, Split split) {
  const std::string& file = split == Split::train ? opt.train_file : opt.test_file;
  if (file.empty())
    throw ConfigError(std::string(split_key(split)) +
                      " is not set; data.dataset = \"packed\" reads the files made by ddp_train "
                      "pack");
  return read_packed(file);
}

const std::array<DatasetInfo, 5> kDatasets = {{
    {.name = "cifar10",
     .shape = {10, 3, 32, 32},
     .read = [](const Options& o, Split s) { return read_cifar10(o.root, s); },
     .read_limited = [](const Options& o, Split s,
                        const Limit& l) { return read_cifar10(o.root, s, l); }},
    {.name = "cifar100",
     .shape = {100, 3, 32, 32},
     .read = [](const Options& o, Split s) { return read_cifar100(o.root, s); },
     .read_limited = [](const Options& o, Split s,
                        const Limit& l) { return read_cifar100(o.root, s, l); }},
    {.name = "mnist",
     .shape = {10, 1, 28, 28},
     .read = [](const Options& o, Split s) { return read_mnist_dir(o.root, s); },
     .read_limited = [](const Options& o, Split s,
                        const Limit& l) { return read_mnist_dir(o.root, s, l); }},
    {.name = "fashion_mnist",
     .shape = {10, 1, 28, 28},
     .read = read_fashion,
     .read_limited = read_fashion_limited},
    {.name = "packed", .shape = {}, .builtin = false, .read = read_packed_split},
}};

std::string squash(std::string_view s) {
  std::string out;
  for (char ch : s)
    if (ch != '-' && ch != '_')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

std::span<const DatasetInfo> datasets() {
  return kDatasets;
}

std::vector<std::string_view> dataset_names() {
  std::vector<std::string_view> out;
  for (const auto& d : kDatasets) out.push_back(d.name);
  return out;
}

std::vector<std::string_view> builtin_dataset_names() {
  std::vector<std::string_view> out;
  for (const auto& d : kDatasets)
    if (d.builtin) out.push_back(d.name);
  return out;
}

const DatasetInfo& find_dataset(std::string_view name) {
  for (const auto& d : kDatasets)
    if (d.name == name) return d;
  std::string hint, valid;
  for (const auto& d : kDatasets) {
    if (squash(name) == squash(d.name)) hint = " (did you mean '" + std::string(d.name) + "'?)";
    valid += (valid.empty() ? "" : ", ") + std::string(d.name);
  }
  throw DataError("unknown dataset '" + std::string(name) + "'" + hint +
                  "; valid names are: " + valid);
}

DatasetShape dataset_shape(const Options& opt) {
  const DatasetInfo& info = find_dataset(opt.dataset);
  if (info.builtin) return info.shape;
  if (opt.train_file.empty() || opt.test_file.empty())
    throw ConfigError(
        "data.dataset = \"packed\" reads data.train_file and data.test_file "
        "(files made by ddp_train pack); set both");
  const auto h = packed::read_header(opt.train_file);
  return {static_cast<std::int64_t>(h.classes.size()), h.channels, h.height, h.width};
}

}  // namespace ddp::data
