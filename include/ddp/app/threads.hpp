#pragma once
// How many compute threads this rank uses.

namespace ddp::app {

// requested > 0: exactly that. 0: the CPUs this process may run on (sched_getaffinity), divided
// among the ranks sharing the node. Applies it (OpenMP/oneDNN) and returns it.
int configure_threads(long long requested);

}  // namespace ddp::app
