#include "pack_temporaries.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "../file_io.hpp"

namespace ddp::data::detail {

namespace fs = std::filesystem;

namespace {

// The whole file, for fcntl.
struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  return fl;
}

// True when some process holds a lock on `file` (false where the file system cannot tell).
bool locked(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl = whole_file(F_WRLCK);
  const bool held = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

// The pid in "<prefix><digits>", or 0.
pid_t pid_of(const std::string& name, const std::string& prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 9)
    return 0;
  pid_t pid = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

}  // namespace

TemporaryLock::TemporaryLock(const fs::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) return;
  struct flock fl = whole_file(F_WRLCK);
  (void)::fcntl(fd_, F_SETLK, &fl);  // no locks here: the pid alone tells staleness
}

int TemporaryLock::reserve(std::uint64_t offset, std::uint64_t bytes) const {
  if (fd_ < 0) return EBADF;
  return ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                     static_cast<off_t>(bytes)) == 0
             ? 0
             : errno;
}

void TemporaryLock::release_unused() const {
  struct stat st {};
  // Truncating to its own size frees the blocks allocated past the end.
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0) (void)::ftruncate(fd_, st.st_size);
}

TemporaryLock::~TemporaryLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> remove_stale_temporaries(const fs::path& output) {
  std::vector<std::string> removed;
  const fs::path dir = output.has_parent_path() ? output.parent_path() : ".";
  std::string prefix = ".";  // appended piecewise: GCC 12's -Wrestrict false positive
  prefix += output.filename().string();
  prefix += ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const pid_t pid = pid_of(name, prefix);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) continue;
    // Alive (or another user's: EPERM) on this host, or locked by a writer elsewhere: in use.
    if (::kill(pid, 0) == 0 || errno != ESRCH || locked(it->path())) continue;
    if (fs::remove(it->path(), ec2))
      removed.push_back(quoted(it->path()) + " (left by process " + std::to_string(pid) + ")");
  }
  return removed;
}

}  // namespace ddp::data::detail
