#pragma once
// The temporary file a packed-file writer builds under (internal to src/data): `.<name>.tmp.<pid>`
// beside the output (io::temp_path_for), locked (a POSIX record lock) while its writer lives. A
// pack that was killed (SIGKILL, a node failure) cannot remove its own; the next pack to the same
// output removes those whose writer is gone, so an interrupted pack does not leak its size.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddp::data::detail {

// Holds a write lock on `file` (opened anew) until destroyed; silently none where the file
// system has no locks. Take it after the file is created and keep it open until it is renamed:
// POSIX drops a process's locks on a file when any of its descriptors for it is closed.
class TemporaryLock {
 public:
  explicit TemporaryLock(const std::filesystem::path& file);
  ~TemporaryLock();
  TemporaryLock(const TemporaryLock&) = delete;
  TemporaryLock& operator=(const TemporaryLock&) = delete;

  // Allocates the file's blocks [offset, offset + bytes) (its size unchanged), so that writes there
  // cannot fail for want of space. Returns 0, or the errno (ENOSPC; EOPNOTSUPP where the file
  // system cannot, and then nothing is reserved).
  int reserve(std::uint64_t offset, std::uint64_t bytes) const;
  // Frees what reserve() allocated past the end of the file (once it is complete).
  void release_unused() const;

 private:
  int fd_ = -1;
};

// Removes the temporaries of `output` that no writer owns any more: named for a process that is
// not alive on this host and not locked (by a writer on another host sharing the file system).
// Returns what it removed, as "'path' (left by process PID)".
std::vector<std::string> remove_stale_temporaries(const std::filesystem::path& output);

}  // namespace ddp::data::detail
