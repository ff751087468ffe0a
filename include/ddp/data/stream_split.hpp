#pragma once
// Which splits stream (data.cache_mb > 0 with packed files) and opening one as a PackedStream with
// the configured cache, loader threads and data.train_limit / test_limit subset.
#include <cstdint>
#include <memory>

#include "ddp/data/options.hpp"
#include "ddp/data/packed_stream.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {

// True when the packed files are streamed rather than held in memory. ConfigError for settings
// streaming cannot honour (data.normalize = dataset, data.distribute = broadcast, cache_mb with a
// built-in dataset).
bool streamed(const Options& d);

// The split's file as a stream holding the same samples, in the same order, as the in-memory
// path (read_packed + limit_samples with `seed`). compute_threads: this rank's compute threads,
// for the default number of loader threads.
std::shared_ptr<PackedStream> open_split_stream(const Options& d, Split split, std::uint64_t seed,
                                                int compute_threads);

}  // namespace ddp::data
