#include "ddp/runtime/signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <mutex>
#include <thread>

namespace ddp::runtime {
namespace {

std::atomic<int> g_signal{0};          // async-signal-safe: lock-free atomic int
std::atomic<long long> g_first_ns{0};  // CLOCK_MONOTONIC of the first signal

// Slurm delivers one stop twice: at a time limit or scancel, slurmstepd signals each task and srun
// forwards the same SIGTERM milliseconds later. Within this window a repeat is the same request.
constexpr long long kSameRequestNs = 1'000'000'000;

long long monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe (POSIX)
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

extern "C" void on_stop_signal(int sig) {
  const long long now = monotonic_ns();
  const int previous = g_signal.exchange(sig);
  if (previous == 0) g_first_ns.store(now);
  // A second interrupt or terminate means "now": leave without cleanup (only async-safe calls).
  if (previous != 0 && (sig == SIGINT || sig == SIGTERM) &&
      now - g_first_ns.load() >= kSameRequestNs) {
    static const char msg[] = "ddp_train: second signal, exiting immediately\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(128 + sig);
  }
}

}  // namespace

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaddset(&set, sig);
  return set;
}

void install_stop_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free);
  static_assert(std::atomic<long long>::is_always_lock_free);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
  // No thread ever runs the handler on its own stack: oneDNN's JIT GEMM kernels point the stack
  // pointer into a heap buffer while they run (oneDNN issue #4845, fixed in 3.11), so a signal
  // frame pushed there overwrote heap memory ("corrupted size vs. prev_size" in free). The
  // signals stay blocked in this thread and in every thread started after it (MPI's, OpenMP's,
  // the loader's); start_signal_thread() takes them with sigwait, and until it runs they wait.
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void start_signal_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::thread([] {
      const sigset_t set = stop_signals();
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) == 0) on_stop_signal(sig);
      }
    }).detach();
  });
}

bool stop_requested() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}
int stop_signal() {
  return g_signal.load(std::memory_order_relaxed);
}

}  // namespace ddp::runtime
