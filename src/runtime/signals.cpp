#include "ddp/runtime/signals.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>

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

void install_stop_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free);
  static_assert(std::atomic<long long>::is_always_lock_free);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
}

bool stop_requested() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}
int stop_signal() {
  return g_signal.load(std::memory_order_relaxed);
}

}  // namespace ddp::runtime
