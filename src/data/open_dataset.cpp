#include "ddp/data/open_dataset.hpp"

#include <sched.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp/data/distribute.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/data/packed_reader.hpp"
#include "ddp/data/packed_stream.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "packed/packed_h5.hpp"

namespace ddp::data {

bool streamed(const Options& d) {
  if (d.cache != "rank" && d.cache != "node")
    throw ConfigError("data.cache = '" + d.cache + "': expected rank or node");
  if (d.cache_mb <= 0) {
    if (d.cache == "node")
      throw ConfigError(
          "data.cache = \"node\" shares a streamed file's cache per node; this run holds its "
          "data in memory (data.cache_mb = 0): for one copy per node use data.distribute = "
          "\"broadcast\", or give data.cache_mb");
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
        "data.cache_mb > 0 every rank streams the file itself (use each-reads, with "
        "data.cache = \"node\" to hold it once per node when it fits), or set data.cache_mb = 0");
  return true;
}

namespace {

std::unique_ptr<Dataset> open_stream(const Options& d, const std::string& file,
                                     std::vector<std::int64_t> samples, int compute_threads) {
  int workers = static_cast<int>(d.workers);
  if (workers <= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    workers = std::clamp(cpus - compute_threads, 1, 8);
  }
  return std::make_unique<PackedStream>(file, StreamOptions{d.cache_mb << 20, workers},
                                        std::move(samples));
}

// The bytes a packed file takes held in memory (read_packed: raw or decoded pixels, or the encoded
// bytes of images of varying sizes, plus labels and offsets).
std::int64_t held_bytes(const std::string& file, const packed::Header& h) {
  if (h.encoding == packed::Encoding::encoded && !h.fixed_size()) {
    const h5::QuietErrors quiet;
    const h5::File f = packed::detail::open_for_reading(file);
    const auto dims = packed::detail::dims_of(f, file, packed::kEncoded);
    return static_cast<std::int64_t>(dims.empty() ? 0 : dims[0]) + h.samples * 12 + 8;
  }
  return h.samples * (h.image_bytes() + 4);
}

std::string mib(std::int64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const Options& d, Split split, std::uint64_t seed,
                                      comm::Communicator& world, int compute_threads,
                                      std::string& note) {
  if (!streamed(d)) {
    LimitedSet set = load_distributed(d, split, seed, world);
    return std::make_unique<InMemoryDataset>(std::move(set.samples), set.source_size);
  }
  const std::string& file = split == Split::train ? d.train_file : d.test_file;
  const packed::Header h = packed::read_header(file);
  std::vector<std::int64_t> samples = Limit::of(d, split, seed).kept(h.samples);
  if (d.cache == "node") {
    // The bytes the node would hold: the kept samples' share of the file's (exact for images of
    // one size). Every rank decides alike (the sharing is collective): the split is held once per
    // node only if it fits on every node, in what that node's ranks may cache together.
    const auto kept = samples.empty() ? h.samples : static_cast<std::int64_t>(samples.size());
    const auto need = static_cast<std::int64_t>(
        static_cast<double>(held_bytes(file, h)) * static_cast<double>(kept) /
        static_cast<double>(std::max<std::int64_t>(1, h.samples)));
    const std::int64_t ranks = ranks_on_node(), budget = ranks * (d.cache_mb << 20);
    std::int64_t too_big = need > budget ? 1 : 0;
    world.allreduce_sum(std::span<std::int64_t>(&too_big, 1));
    if (too_big == 0) {
      note += "data.cache = node: " + file + " (" + mib(need) +
              ") is held once per node in shared memory\n";
      // The chunks as the stream would give them: data.shuffle_window orders alike either way.
      std::vector<std::int64_t> chunks;
      if (d.shuffle_window > 0) chunks = chunk_of_samples(file, samples);
      // Rank 0 takes the subset before sharing, so the node holds only the kept samples.
      LimitedSet set = broadcast_samples(
          [&] {
            return LimitedSet{limit_samples(read_packed(file), Limit::of(d, split, seed)),
                              h.samples};
          },
          world, "data.cache = \"node\"");
      return std::make_unique<InMemoryDataset>(std::move(set.samples), h.samples,
                                               std::move(chunks));
    }
    note += "data.cache = node: " + file + " takes " + mib(need) + " in memory, more than " +
            (need > budget ? std::to_string(ranks) + " ranks x data.cache_mb = " + mib(budget) +
                                 " on this node"
                           : std::string("another node's ranks x data.cache_mb")) +
            ": each rank streams it through its own cache\n";
  }
  return open_stream(d, file, std::move(samples), compute_threads);
}

}  // namespace ddp::data
