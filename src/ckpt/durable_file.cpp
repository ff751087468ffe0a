#include "durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::ckpt {

bool is_temp_name(const std::string& name, long* pid) {
  const std::string marker = ".tmp.";
  const auto at = name.rfind(marker);
  // Snapshots and the run directory's other atomically written files (a rank killed while it
  // writes one leaves its temporary behind).
  bool ours = name.rfind(".snapshot_", 0) == 0;
  for (const char* file : {"run.json", "config.toml", "metrics.jsonl", "model.txt", "trace.json"})
    ours = ours || name.rfind("." + std::string(file) + ".", 0) == 0;
  if (!ours || at == std::string::npos) return false;
  const std::string digits = name.substr(at + marker.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *pid = std::stol(digits);
  return true;
}

namespace {

// Writes every byte into an open descriptor; "" or what failed.
std::string write_all(int fd, const std::string& bytes, const std::string& name) {
  const char* at = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "writing " + name + ": " + errno_text(errno);
    at += n;
    left -= static_cast<std::size_t>(n);
  }
  return "";
}

// A character or block device, a FIFO or the caller's own stdout/stderr (/dev/stdout): written
// into as it is, never replaced. A regular file reached through /dev or /proc (a redirected
// stdout) is appended to, as the shell's redirection would.
// `flags`: O_APPEND, or O_CREAT | O_TRUNC for a dangling symbolic link.
void write_into(const std::filesystem::path& file, const std::string& bytes, int flags) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC | flags, 0666);
  if (fd < 0) throw SystemError("cannot write '" + file.string() + "': " + errno_text(errno));
  std::string error = write_all(fd, bytes, file.string());
  if (::close(fd) != 0 && error.empty()) error = "closing it: " + errno_text(errno);
  if (!error.empty()) throw SystemError("cannot write '" + file.string() + "': " + error);
}

// The descriptor a /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N path names, or -1.
// Written through that descriptor itself (flushed first), the bytes land where the process's own
// output is, in order, whatever it is redirected to; opening the path anew would start at offset
// 0 of a redirected file and overwrite what the process printed.
int own_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string p(prefix);
    if (path.rfind(p, 0) != 0 || path.size() == p.size() || path.size() > p.size() + 9) continue;
    const std::string digits = path.substr(p.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) return std::stoi(digits);
  }
  return -1;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void write_file_atomically(const std::filesystem::path& given, const std::string& bytes) {
  namespace fs = std::filesystem;
  // Only a regular file (or a new name) is replaced by rename: a device node, a FIFO or
  // /dev/stdout is written into (as `cat > PATH` would), a directory or socket is refused, and a
  // symbolic link keeps pointing where it did (its target is what gets replaced).
  fs::path file = given;
  const std::string text = given.string();
  const bool special_dir = text.rfind("/dev/", 0) == 0 || text.rfind("/proc/", 0) == 0;
  struct stat st {};
  if (::stat(given.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode))
      throw SystemError("cannot write '" + text + "': it is " + kind_of(st.st_mode) +
                        "; give a file name");
    if (const int fd = own_descriptor(text); fd >= 0) {
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      const std::string error = write_all(fd, bytes, text);
      if (!error.empty()) throw SystemError("cannot write '" + text + "': " + error);
      return;
    }
    if (!S_ISREG(st.st_mode) || special_dir) {
      write_into(given, bytes, S_ISREG(st.st_mode) ? O_APPEND : 0);
      return;
    }
    std::error_code ec;
    const fs::path target = fs::canonical(given, ec);
    if (!ec) file = target;
  } else if (struct stat lst{}; ::lstat(given.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    // A dangling link: create what it names, through it.
    write_into(given, bytes, O_CREAT | O_TRUNC);
    return;
  }
  const fs::path tmp = temp_path_for(file);
  std::string error = write_durably(tmp, bytes.data(), bytes.size());
  // A file replaced keeps its permissions (a report made readable to others stays so).
  if (error.empty() && S_ISREG(st.st_mode) && ::chmod(tmp.c_str(), st.st_mode & 07777) != 0)
    error = "setting the mode of " + tmp.filename().string() + ": " + errno_text(errno);
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
    throw SystemError("cannot write '" + text + "': " + error);
  }
}

}  // namespace ddp::ckpt
