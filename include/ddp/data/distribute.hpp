#pragma once
// Getting the dataset to every rank: each rank reads the files (shared filesystem), or rank 0
// reads them and the bytes travel over MPI into one MPI shared-memory window per node, so three
// ranks on a workstation hold one copy, not three.
#include <filesystem>
#include <string>

#include "ddp/data/dataset.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {

// distribute: "each-reads" | "broadcast". Collective over MPI_COMM_WORLD. A read error on rank 0
// under "broadcast" reaches every rank as a DataError that says rank 0 failed and why.
Dataset load_distributed(const std::string& name, const std::filesystem::path& root, Split split,
                         const std::string& distribute);
// The same from the [data] options, packed files included.
Dataset load_distributed(const Options& opt, Split split);

}  // namespace ddp::data
