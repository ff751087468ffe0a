#pragma once
// A snapshot, or its state alone, as a flat byte string and back. A child process that parsed an
// unverified file (forked_call.hpp) hands its result to the parent, which never parses that file
// itself; rank 0 hands the state of the snapshot it resumed from to the other ranks
// (resume_broadcast.hpp). The state is encoded field by field through the field table
// (snapshot_fields.hpp); decoding checks every length.
#include <stdexcept>
#include <string>
#include <string_view>

#include "ddp/ckpt/snapshot.hpp"

namespace ddp::ckpt {

std::string encode_snapshot(const Snapshot& s);
// Throws std::runtime_error when `bytes` is not exactly what encode_snapshot wrote.
Snapshot decode_snapshot(std::string_view bytes);

std::string encode_state(const SnapshotState& s);
// Throws std::runtime_error when `bytes` is not exactly what encode_state wrote.
SnapshotState decode_state(std::string_view bytes);

}  // namespace ddp::ckpt
