#pragma once
// Getting the dataset to every rank: each rank reads the files (shared filesystem), or rank 0
// reads them and the bytes travel through the Communicator (under its stall timeout) into one MPI
// shared-memory window per node, so three ranks on a workstation hold one copy, not three.
#include <cstdint>
#include <functional>
#include <string>

#include "ddp/comm/communicator.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// The split limited as opt's data.*_limit say (read_limited, train.seed `seed`), by
// opt.distribute: "each-reads" | "broadcast". Collective over `world` (the job's ranks, MPI).
// A read error on rank 0 under "broadcast" reaches every rank as a DataError that says rank 0
// failed and why; a rank 0 that never answers is reported after the communicator's timeout.
LimitedSet load_distributed(const Options& opt, Split split, std::uint64_t seed,
                            comm::Communicator& world);

// Rank 0 runs `read`; every node then holds one copy of the result in MPI shared memory (fixed-size
// images, or encoded ones of varying sizes with their offsets). Collective over `world`. `setting`
// names what asked for it in the other ranks' error when rank 0 cannot read.
LimitedSet broadcast_samples(const std::function<LimitedSet()>& read, comm::Communicator& world,
                             const std::string& setting = "data.distribute = \"broadcast\"");

// How many of the job's ranks run on this rank's node (MPI's shared-memory split).
int ranks_on_node();

}  // namespace ddp::data
