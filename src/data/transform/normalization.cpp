#include "ddp/data/normalization.hpp"

#include <string>
#include <vector>

#include "ddp/data/readers.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

Normalization make_normalization(const Options& d, std::int64_t channels, const SampleSet* train) {
  const auto c = static_cast<std::size_t>(channels);
  if (d.normalize == "dataset") {
    if (!train) throw Error("internal: data.normalize = \"dataset\" needs the training set");
    return compute_normalization(*train);
  }
  Normalization n;
  if (d.normalize == "none") {
    n.mean.assign(c, 0.0f);
    n.std.assign(c, 1.0f);
    return n;
  }
  auto expand = [&](const std::vector<double>& v, const char* key) {
    if (v.size() != 1 && v.size() != c)
      throw ConfigError(std::string("data.") + key + " has " + std::to_string(v.size()) +
                        " values but the dataset has " + std::to_string(c) +
                        " channels: give 1 value or " + std::to_string(c));
    std::vector<float> out(c);
    for (std::size_t i = 0; i < c; ++i) out[i] = static_cast<float>(v[v.size() == 1 ? 0 : i]);
    return out;
  };
  n.mean = expand(d.mean, "mean");
  n.std = expand(d.std, "std");
  return n;
}

Normalization training_normalization(const Options& opt, std::int64_t channels,
                                     std::uint64_t seed) {
  if (opt.normalize != "dataset") return make_normalization(opt, channels, nullptr);
  const auto train = read_limited(opt, Split::train, seed).samples;
  return make_normalization(opt, channels, &train);
}

}  // namespace ddp::data
