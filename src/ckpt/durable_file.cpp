#include "durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::ckpt {

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

bool is_temp_name(const std::string& name, long* pid) {
  const std::string marker = ".tmp.";
  const auto at = name.rfind(marker);
  // Snapshots and the run directory's other atomically written files (run.json, config.toml,
  // metrics.jsonl).
  const bool ours = name.rfind(".snapshot_", 0) == 0 || name.rfind(".run.json.", 0) == 0 ||
                    name.rfind(".config.toml.", 0) == 0 || name.rfind(".metrics.jsonl.", 0) == 0;
  if (!ours || at == std::string::npos) return false;
  const std::string digits = name.substr(at + marker.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *pid = std::stol(digits);
  return true;
}

void write_file_atomically(const std::filesystem::path& file, const std::string& bytes) {
  const std::filesystem::path tmp = temp_path_for(file);
  std::string error = write_durably(tmp, bytes.data(), bytes.size());
  if (error.empty()) {
    std::error_code ec;
    std::filesystem::rename(tmp, file, ec);
    if (ec) error = "renaming " + tmp.filename().string() + ": " + ec.message();
  }
  if (error.empty()) {
    const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
    if (const int err = fsync_path(dir))
      error = "fsync of directory " + dir.string() + ": " + errno_text(err);
  }
  if (!error.empty()) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw SystemError("cannot write '" + file.string() + "': " + error);
  }
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace ddp::ckpt
