#include "ddp/train/kept_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace

KeptFile::KeptFile(std::filesystem::path path, std::string content)
    : path_(std::move(path)), content_(std::move(content)), kept_(true) {
  ckpt::write_file_atomically(path_, content_);
  open_for_append();
}

KeptFile KeptFile::adopt(std::filesystem::path path) {
  KeptFile k;
  k.path_ = std::move(path);
  struct stat st {};
  if (::stat(k.path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return k;
  std::ifstream in(k.path_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return k;
  k.content_ = text.str();
  k.dev_ = st.st_dev;
  k.ino_ = st.st_ino;
  k.kept_ = true;
  return k;
}

KeptFile::KeptFile(KeptFile&& o) noexcept
    : path_(std::move(o.path_)),
      content_(std::move(o.content_)),
      fd_(std::exchange(o.fd_, -1)),
      dev_(o.dev_),
      ino_(o.ino_),
      kept_(std::exchange(o.kept_, false)) {}

KeptFile::~KeptFile() {
  if (fd_ >= 0) ::close(fd_);
}

void KeptFile::open_for_append() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0)
    throw SystemError("cannot write " + path_.string() + ": " + errno_text(errno) +
                      " (check that run.dir is writable)");
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

bool KeptFile::restore_if_gone() {
  if (!kept_) return false;
  struct stat st {};
  const bool same = ::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
  if (same) return false;
  std::fprintf(stderr,
               "ddp_train: warning: %s was deleted or replaced while the run was writing it; "
               "writing it again with everything it held\n",
               path_.c_str());
  std::fflush(stderr);
  ckpt::write_file_atomically(path_, content_);
  if (fd_ >= 0) {
    open_for_append();
  } else if (::stat(path_.c_str(), &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  return true;
}

void KeptFile::append(const std::string& text) {
  restore_if_gone();
  if (fd_ < 0) open_for_append();
  const char* at = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw SystemError("writing " + path_.string() + " failed: " + errno_text(errno) +
                        " (disk full?)");
    at += n;
    left -= static_cast<std::size_t>(n);
  }
  content_ += text;
}

}  // namespace ddp::train
