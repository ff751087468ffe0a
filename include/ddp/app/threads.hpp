#pragma once
// How many compute threads this rank uses.

namespace ddp::app {

// runtime.threads may ask for at most this many threads per CPU the rank may use.
inline constexpr int kThreadsPerCpu = 4;
// The largest runtime.threads accepted on a rank that may use `cpus` CPUs.
int max_compute_threads(int cpus);

// requested > 0: exactly that (a ConfigError above max_compute_threads of the CPUs this process
// may use). 0: those CPUs (sched_getaffinity), divided among the `local_size` ranks sharing the
// node. Applies it (OpenMP/oneDNN) and returns it. No communication.
int configure_threads(long long requested, int local_size);

}  // namespace ddp::app
