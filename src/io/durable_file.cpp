#include "ddp/io/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ddp::io {

std::string write_durably(const std::filesystem::path& p, const void* data, std::size_t size) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  const std::string name = p.filename().string();
  if (fd < 0) return "creating " + name + ": " + errno_text(errno);
  const char* at = static_cast<const char*>(data);
  std::string error;
  while (size > 0 && error.empty()) {
    const ssize_t n = ::write(fd, at, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "writing " + name + ": " + errno_text(errno);
    } else {
      at += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  if (error.empty() && ::fsync(fd) != 0) error = "fsync of " + name + ": " + errno_text(errno);
  // Network file systems may report a failed write only here.
  if (::close(fd) != 0 && error.empty()) error = "closing " + name + ": " + errno_text(errno);
  return error;
}

int fsync_path(const std::filesystem::path& p) {
  // O_RDONLY suffices for fsync on Linux, and is the only way to open a directory.
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

std::filesystem::path temp_path_for(const std::filesystem::path& file) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  // Appended piecewise: `"." + std::string&&` trips a GCC 12 -Wrestrict false positive.
  std::string name = ".";
  name += file.filename().string();
  name += ".tmp.";
  name += std::to_string(::getpid());
  return dir / name;
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace ddp::io
