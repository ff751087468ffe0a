#pragma once
// A Snapshot as a flat byte string and back: how a child process that parsed an unverified file
// (forked_call.hpp) hands its result to the parent, which never parses that file itself. Both ends
// are the same binary, so values travel in native byte order; decoding checks every length.
#include <stdexcept>
#include <string>
#include <string_view>

#include "ddp/ckpt/snapshot.hpp"

namespace ddp::ckpt {

std::string encode_snapshot(const Snapshot& s);
// Throws std::runtime_error when `bytes` is not exactly what encode_snapshot wrote.
Snapshot decode_snapshot(std::string_view bytes);

}  // namespace ddp::ckpt
