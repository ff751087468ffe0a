#include "ddp/data/stream_split.hpp"

#include <sched.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp/data/packed_format.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

bool streamed(const Options& d) {
  if (d.cache_mb <= 0) {
    if (d.shuffle_window > 0)
      throw ConfigError("data.shuffle_window = " + std::to_string(d.shuffle_window) +
                        " orders a streamed file's chunks; this run holds its data in memory "
                        "(data.cache_mb = 0), where a full shuffle costs nothing: set "
                        "data.shuffle_window = 0");
    return false;
  }
  if (d.dataset != "packed")
    throw ConfigError("data.cache_mb = " + std::to_string(d.cache_mb) +
                      " streams packed files only; data.dataset = '" + d.dataset +
                      "' is read whole (set data.cache_mb = 0, or pack it with ddp_train pack)");
  if (d.normalize == "dataset")
    throw ConfigError(
        "data.normalize = \"dataset\" reads every training image up front, which a streamed file "
        "(data.cache_mb > 0) does not hold; give data.mean and data.std with normalize = "
        "\"config\"");
  if (d.distribute == "broadcast")
    throw ConfigError(
        "data.distribute = \"broadcast\" holds the whole file in (shared) memory; with "
        "data.cache_mb > 0 every rank streams the file itself (use each-reads), or set "
        "data.cache_mb = 0");
  // The stream writes each sample at its packed size into a view of one image size; the
  // resized-crop path decodes per sample from a different container (Dataset::encoded).
  if (d.train_size > 0)
    throw ConfigError("data.cache_mb = " + std::to_string(d.cache_mb) +
                      " with data.train_size = " + std::to_string(d.train_size) +
                      ": streaming does not take the resized-crop transforms yet; set "
                      "data.cache_mb = 0 (the pack is held encoded in memory and decoded per "
                      "sample)");
  return true;
}

std::shared_ptr<PackedStream> open_split_stream(const Options& d, Split split, std::uint64_t seed,
                                                int compute_threads) {
  const std::string& file = split == Split::train ? d.train_file : d.test_file;
  const std::int64_t limit = split == Split::train ? d.train_limit : d.test_limit;
  const std::int64_t n = packed::read_header(file).samples;
  // The samples limit_samples would keep, numbered as it numbers them.
  std::vector<std::int64_t> samples;
  if (limit > 0 && limit < n) {
    if (d.limit_subset == "first") {
      samples.resize(static_cast<std::size_t>(limit));
      for (std::int64_t i = 0; i < limit; ++i) samples[static_cast<std::size_t>(i)] = i;
    } else {
      samples = random_subset(n, limit, seed, split);
    }
  }
  int workers = static_cast<int>(d.workers);
  if (workers <= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    workers = std::clamp(cpus - compute_threads, 1, 8);
  }
  return std::make_shared<PackedStream>(file, StreamOptions{d.cache_mb << 20, workers},
                                        std::move(samples));
}

}  // namespace ddp::data
