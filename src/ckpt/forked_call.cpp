#include "forked_call.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

namespace ddp::ckpt {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// The child: the work, its answer ('O' or 'E', the length, then the result or the exception's
// message), _exit.
[[noreturn]] void child_main(int out, pid_t parent, const std::function<std::string()>& work) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
  // The parent handles stop signals; a job-wide SIGTERM must not read as a crash of the work.
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGPIPE}) std::signal(sig, SIG_IGN);
  // A crash here is an expected verdict on bad input, which the parent reports: no backtrace from
  // Open MPI's (or a sanitizer's) handler, no "free(): invalid pointer" from glibc on stderr (it
  // would read as the parent's heap corruption), no core file.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) ::dup2(null, 2);
  char status = 'O';
  std::string answer;
  try {
    answer = work();
  } catch (const std::exception& e) {
    status = 'E';
    answer = e.what();
  } catch (...) {
    status = 'E';
    answer = "unknown error";
  }
  const std::uint64_t size = answer.size();
  const bool sent = write_all(out, &status, 1) &&
                    write_all(out, reinterpret_cast<const char*>(&size), sizeof size) &&
                    write_all(out, answer.data(), answer.size());
  ::_exit(sent ? 0 : 1);
}

// waitpid, through interruptions by signals (the stop handlers are installed with SA_RESTART, but
// a handler installed by someone else may not be).
int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace

std::string call_in_child(const std::function<std::string()>& work,
                          std::chrono::seconds time_limit) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw ForkedCallFailure(
        ForkedCallFailure::Kind::kNotStarted,
        std::string("cannot start a child process: pipe: ") + std::strerror(errno));
  Fd in(fds[0]), out(fds[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw ForkedCallFailure(
        ForkedCallFailure::Kind::kNotStarted,
        std::string("cannot start a child process: fork: ") + std::strerror(errno));
  if (pid == 0) {
    in.reset();
    child_main(out.get(), parent, work);
  }
  out.reset();  // so that the read below sees end-of-file when the child ends

  std::string answer;
  const auto deadline = Clock::now() + time_limit;
  char buf[1 << 16];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      reap(pid);
      throw ForkedCallFailure(ForkedCallFailure::Kind::kTimedOut,
                              "did not finish within " + std::to_string(time_limit.count()) + " s");
    }
    pollfd p{in.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    const ssize_t n = ready < 0 ? -1 : ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::kill(pid, SIGKILL);
      reap(pid);
      throw ForkedCallFailure(ForkedCallFailure::Kind::kDied,
                              "its answer could not be read: " + why);
    }
    if (n == 0) break;
    answer.append(buf, static_cast<std::size_t>(n));
  }
  const int status = reap(pid);
  if (status >= 0 && WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    throw ForkedCallFailure(
        ForkedCallFailure::Kind::kDied,
        "crashed (signal " + std::to_string(sig) + (name ? std::string(", ") + name : "") + ")");
  }
  // Complete by its length (waitpid cannot tell where SIGCHLD is ignored).
  constexpr std::size_t kPrefix = 1 + sizeof(std::uint64_t);
  std::uint64_t size = 0;
  if (answer.size() >= kPrefix) std::memcpy(&size, answer.data() + 1, sizeof size);
  if (answer.size() < kPrefix || answer.size() - kPrefix != size ||
      (answer[0] != 'O' && answer[0] != 'E'))
    throw ForkedCallFailure(
        ForkedCallFailure::Kind::kDied,
        "ended without an answer (exit status " +
            std::to_string(status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  const bool threw = answer[0] == 'E';
  answer.erase(0, kPrefix);
  if (threw) throw ForkedCallFailure(ForkedCallFailure::Kind::kThrew, answer);
  return answer;
}

}  // namespace ddp::ckpt
