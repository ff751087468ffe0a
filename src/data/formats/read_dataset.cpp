#include <filesystem>
#include <string>

#include "ddp/data/readers.hpp"
#include "ddp/data/registry.hpp"

namespace ddp::data {

SampleSet read_dataset(const Options& opt, Split split) {
  return find_dataset(opt.dataset).read(opt, split);
}

SampleSet read_dataset(const std::string& name, const std::filesystem::path& root, Split split) {
  Options opt;
  opt.dataset = name;
  opt.root = root.string();
  return read_dataset(opt, split);
}

}  // namespace ddp::data
