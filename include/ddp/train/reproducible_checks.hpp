#pragma once
// What train.reproducible cannot make bitwise is refused before training starts, with the reason:
// chunks computed on different kernels round differently, and oneDNN picks its kernels by the CPU's
// instruction set (and tunes their blocking to the CPU), so every rank must run the same kind of
// CPU. GPUs are not supported by reproducible mode yet. `runtime.threads` is free: each chunk runs
// on one thread whatever a rank has.
#include <string>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"

namespace ddp::train {

// What a rank computes on, as reproducibility sees it.
struct ComputeKind {
  std::string isa;        // oneDNN's instruction set ("avx512_core", "avx2", ...)
  std::string cpu_model;  // /proc/cpuinfo's "model name" ("" when unknown)
};

// The ranks that differ from rank 0, as the refusal names them: "" when all are alike, otherwise
// "train.reproducible: ranks run on different CPUs: rank 0 avx2 (Model A), rank 2 avx512_core
// (Model B); ...". Pure: `kinds` is every rank's, index = rank.
std::string compute_kind_mismatch(const std::vector<ComputeKind>& kinds);

// Collective: ConfigError when train.reproducible cannot hold on this job - a GPU backend, or
// ranks on different kinds of CPU (naming the ranks and their instruction sets).
void check_reproducible(const backend::Backend& be, comm::Communicator& comm);

}  // namespace ddp::train
