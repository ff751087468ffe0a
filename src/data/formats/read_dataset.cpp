#include <filesystem>
#include <string>

#include "ddp/data/readers.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/data/subset.hpp"

namespace ddp::data {

SampleSet read_dataset(const Options& opt, Split split) {
  return find_dataset(opt.dataset).read(opt, split);
}

LimitedSet read_limited(const Options& opt, Split split, std::uint64_t seed) {
  const Limit limit = Limit::of(opt, split, seed);
  const DatasetInfo& info = find_dataset(opt.dataset);
  if (info.read_limited) return info.read_limited(opt, split, limit);
  const SampleSet all = info.read(opt, split);
  return {limit_samples(all, limit), all.size()};
}

SampleSet read_dataset(const std::string& name, const std::filesystem::path& root, Split split) {
  Options opt;
  opt.dataset = name;
  opt.root = root.string();
  return read_dataset(opt, split);
}

}  // namespace ddp::data
