// broadcast_resume_state: rank 0's snapshot state as the field table's encoding, with a length that
// also carries "none" (0) and "rank 0 failed" (-1).
#include "ddp/ckpt/resume_broadcast.hpp"

#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>

#include "ddp/error.hpp"
#include "snapshot_codec.hpp"

namespace ddp::ckpt {
namespace {

constexpr std::int64_t kNoSnapshot = 0;  // an encoded state is never empty
constexpr std::int64_t kRootFailed = -1;

}  // namespace

std::optional<SnapshotState> broadcast_resume_state(
    comm::Communicator& comm, const std::function<std::optional<SnapshotState>()>& load_on_root,
    const std::string& what) {
  std::optional<SnapshotState> state;
  std::exception_ptr error;
  std::string bytes;
  std::int64_t length = kNoSnapshot;
  if (comm.rank() == 0) {
    // Anything rank 0 throws is reported to the others: an exception that only rank 0 saw would
    // leave them waiting at the next collective until its timeout.
    try {
      state = load_on_root();
      if (state && comm.size() > 1) {
        bytes = encode_state(*state);
        length = static_cast<std::int64_t>(bytes.size());
      }
    } catch (...) {
      error = std::current_exception();
      length = kRootFailed;
    }
  }
  if (comm.size() > 1) {
    comm.broadcast(std::as_writable_bytes(std::span<std::int64_t>(&length, 1)), 0);
    if (length == kRootFailed && comm.rank() != 0)
      throw Error("rank 0 could not " + what + " (see its error)");
  }
  if (error) std::rethrow_exception(error);
  if (comm.size() == 1 || length == kNoSnapshot) return state;

  bytes.resize(static_cast<std::size_t>(length));
  comm.broadcast(std::as_writable_bytes(std::span<char>(bytes.data(), bytes.size())), 0);
  if (comm.rank() == 0) return state;
  try {
    return decode_state(bytes);
  } catch (const std::runtime_error& e) {
    throw Error("rank " + std::to_string(comm.rank()) +
                ": the snapshot state rank 0 sent does not decode (" + e.what() +
                "); do all ranks run the same ddp_train build?");
  }
}

}  // namespace ddp::ckpt
