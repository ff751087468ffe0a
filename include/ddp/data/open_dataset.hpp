#pragma once
// Opening a split as the Dataset the trainer reads: held in memory (each rank reads the files, or
// rank 0 reads and each node holds one copy: data.distribute), or a packed file streamed through a
// bounded cache (data.cache_mb > 0), or held once per node when it fits (data.cache = "node"). The
// data.train_limit / test_limit subset is applied in each case, the same samples in the same order.
#include <cstdint>
#include <memory>
#include <string>

#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {

// True when the packed files are streamed rather than held in memory. ConfigError for settings
// streaming cannot honour (data.normalize = dataset, data.distribute = broadcast, cache_mb with a
// built-in dataset, data.cache = node without streaming).
bool streamed(const Options& d);

// The split as training reads it. Collective over `world` (the job's ranks) when the data is
// shared per node. seed: train.seed (the limits' subset); compute_threads: this rank's, for the
// default number of loader threads. `note` gets a start-up line when data.cache = "node" could not
// hold the split once per node (and why).
std::unique_ptr<Dataset> open_dataset(const Options& d, Split split, std::uint64_t seed,
                                      comm::Communicator& world, int compute_threads,
                                      std::string& note);

}  // namespace ddp::data
