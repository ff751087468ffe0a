#include <cctype>
#include <filesystem>
#include <string>

#include "ddp/data/readers.hpp"
#include "ddp/error.hpp"
#include "file_io.hpp"

namespace ddp::data {

namespace fs = std::filesystem;

Dataset read_dataset(const std::string& name, const fs::path& root, Split split) {
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
  for (const char* valid : {"cifar10", "cifar100", "mnist", "fashion_mnist"}) {
    if (squash(name) == squash(valid)) hint = std::string(" (did you mean '") + valid + "'?)";
  }
  throw DataError("unknown dataset '" + name + "'" + hint +
                  "; valid names are: cifar10, cifar100, mnist, fashion_mnist");
}

}  // namespace ddp::data
