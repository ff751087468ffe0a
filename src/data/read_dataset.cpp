#include <cctype>
#include <filesystem>
#include <string>

#include "ddp/data/packed_reader.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/error.hpp"
#include "file_io.hpp"

namespace ddp::data {

namespace fs = std::filesystem;

Dataset read_dataset(const Options& opt, Split split) {
  if (opt.dataset != "packed") return read_dataset(opt.dataset, opt.root, split);
  const std::string& file = split == Split::train ? opt.train_file : opt.test_file;
  if (file.empty())
    throw ConfigError(std::string(split == Split::train ? "data.train_file" : "data.test_file") +
                      " is not set; data.dataset = \"packed\" reads the files made by ddp_train "
                      "pack");
  return read_packed(file);
}

Dataset read_dataset(const std::string& name, const fs::path& root, Split split) {
  if (name == "packed")
    throw ConfigError(
        "internal: data.dataset = \"packed\" is read from data.train_file and "
        "data.test_file, which this caller does not pass");
  if (name == "cifar10") return read_cifar10(root, split);
  if (name == "cifar100") return read_cifar100(root, split);
  if (name == "mnist") return read_mnist_dir(root, split);
  if (name == "fashion_mnist") {
    std::error_code ec;
    const fs::path debian = "/usr/share/datasets/fashion-mnist";
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
    return read_mnist_dir(root, split);
  }
  // Suggest the spelling meant when only case, '-' or '_' differ ("CIFAR-10", "fashion-mnist").
  auto squash = [](const std::string& s) {
    std::string out;
    for (char ch : s) {
      if (ch != '-' && ch != '_')
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return out;
  };
  std::string hint;
  for (const char* valid : {"cifar10", "cifar100", "mnist", "fashion_mnist", "packed"}) {
    if (squash(name) == squash(valid)) hint = std::string(" (did you mean '") + valid + "'?)";
  }
  throw DataError("unknown dataset '" + name + "'" + hint +
                  "; valid names are: cifar10, cifar100, mnist, fashion_mnist, packed");
}

}  // namespace ddp::data
