#include "ddp/train/rank_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "ddp/train/progress_log.hpp"

namespace ddp::train {
namespace {

// The whole buffer, retrying short writes and signals.
void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nothing sensible to do with a failing log
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

RankLog::RankLog(const std::filesystem::path& run_dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%04d.log", rank);
  path_ = run_dir / "logs" / name;
  std::error_code ec;
  std::filesystem::create_directories(path_.parent_path(), ec);
  fd_ = ec ? -1 : ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    std::fprintf(stderr,
                 "ddp_train: warning (rank %d): cannot write %s (%s): its warnings and "
                 "errors go to stderr only\n",
                 rank, path_.c_str(), ec ? ec.message().c_str() : std::strerror(errno));
    return;
  }
  cookie_io_functions_t io{};
  io.write = &RankLog::write;
  io.close = &RankLog::close;
  copy_ = fopencookie(this, "w", io);
  if (!copy_) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  // Unbuffered like stderr itself: every fprintf reaches both at once.
  std::setvbuf(copy_, nullptr, _IONBF, 0);
  std::fflush(stderr);
  original_ = stderr;
  stderr = copy_;  // glibc's stderr is an assignable variable
}

RankLog::~RankLog() {
  if (!copy_) return;
  stderr = original_;
  std::fclose(copy_);
  ::close(fd_);
}

ssize_t RankLog::write(void* self, const char* data, size_t size) {
  auto* log = static_cast<RankLog*>(self);
  write_all(fileno(log->original_), data, size);
  // The file gets each line with its time: a person matches it with the job's output.
  std::string stamped;
  for (std::size_t i = 0; i < size; ++i) {
    if (log->line_start_) stamped.append("[").append(timestamp_now()).append("] ");
    stamped += data[i];
    log->line_start_ = data[i] == '\n';
  }
  write_all(log->fd_, stamped.data(), stamped.size());
  return static_cast<ssize_t>(size);
}

void RankLog::note(const std::string& line) {
  if (!copy_) return;
  std::string stamped;
  stamped.append("[").append(timestamp_now()).append("] ").append(line).append("\n");
  write_all(fd_, stamped.data(), stamped.size());
}

int RankLog::close(void*) {
  return 0;
}

}  // namespace ddp::train
