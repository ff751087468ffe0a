#pragma once
// Getting the dataset to every rank: each rank reads the files (shared filesystem), or rank 0
// reads them and the bytes travel through the Communicator (under its stall timeout) into one MPI
// shared-memory window per node, so three ranks on a workstation hold one copy, not three.
#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {

// opt.distribute: "each-reads" | "broadcast". Collective over `world` (the job's ranks, MPI).
// A read error on rank 0 under "broadcast" reaches every rank as a DataError that says rank 0
// failed and why; a rank 0 that never answers is reported after the communicator's timeout.
Dataset load_distributed(const Options& opt, Split split, comm::Communicator& world);

}  // namespace ddp::data
