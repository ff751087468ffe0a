#include "ddp/runtime/signals.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace ddp::runtime {
namespace {

std::atomic<int> g_signal{0};  // async-signal-safe: lock-free atomic int

extern "C" void on_stop_signal(int sig) {
  const int previous = g_signal.exchange(sig);
  // A second interrupt or terminate means "now": leave without cleanup (only async-safe calls).
  if (previous != 0 && (sig == SIGINT || sig == SIGTERM)) {
    static const char msg[] = "ddp_train: second signal, exiting immediately\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(128 + sig);
  }
}

}  // namespace

void install_stop_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free);
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
