#pragma once
// Resuming on many ranks: rank 0 reads the snapshot (the run directory need not be shared) and its
// state reaches every rank encoded field by field through the snapshot field table: one broadcast
// of the length, one of the bytes. The tensors travel on their own (sync::broadcast_state).
#include <functional>
#include <optional>
#include <string>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/communicator.hpp"

namespace ddp::ckpt {

// Collective over `comm`. Rank 0 calls load_on_root() (the other ranks never do): it finds and
// reads the snapshot, restores what it must, and returns the snapshot's state, or nullopt when
// there is none to resume from. Every rank returns what it returned. When it throws, rank 0 tells
// the others before it rethrows, and they throw ddp::Error ("rank 0 could not " + `what` + " (see
// its error)") instead of waiting for state that never comes. A rank that cannot decode rank 0's
// bytes (another build of the program) throws ddp::Error saying so. train.init loads its file the
// same way (what: "load train.init").
std::optional<SnapshotState> broadcast_resume_state(
    comm::Communicator& comm, const std::function<std::optional<SnapshotState>()>& load_on_root,
    const std::string& what = "resume from its snapshot");

}  // namespace ddp::ckpt
