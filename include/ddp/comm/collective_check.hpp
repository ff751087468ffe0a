#pragma once
// What `doctor` asks of a communicator before anyone trusts it with a training run: do its
// collectives compute the right answer, and how fast is its all-reduce at each message size.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"

namespace ddp::comm {

// Runs every collective the trainer uses on known patterns (float, double and int64 sums with
// counts that are not multiples of anything, several non-blocking sums in flight at once,
// broadcast from the last rank, allgather) and checks the results exactly. Collective. Returns
// what this rank found wrong ("" when everything was right), e.g. "allreduce float: 3 of 1000003
// elements wrong, first at 17: 5 != 6".
std::string verify_collectives(Communicator& comm);

struct BandwidthRow {
  std::size_t bytes = 0;  // message size
  int iterations = 0;     // timed all-reduces (after warm-up)
  double seconds = 0.0;   // mean time of one all-reduce, slowest rank
  double algbw = 0.0;     // bytes / seconds, GB/s (1e9)
  double busbw = 0.0;     // algbw * 2(n-1)/n: the ring all-reduce's per-link traffic
};

// busbw from algbw for `ranks` ranks, as nccl-tests defines it: algbw * 2(n-1)/n (0 for n = 1:
// nothing crosses a link).
double allreduce_busbw(double algbw, int ranks);

// Message sizes from `min_bytes` to `max_bytes`, each `factor` times the previous, rounded down to
// whole floats (at least one).
std::vector<std::size_t> sweep_sizes(std::size_t min_bytes, std::size_t max_bytes, int factor);

// Times float all-reduces (sum) of each size: a few warm-ups, then `iterations` timed ones, or
// fewer for large messages so that one size takes about a second at most. The time is the
// slowest rank's. Collective; every rank gets the same rows. The messages live in `buffer` when it
// is given (device memory for NcclComm; it must hold the largest size), else in host memory.
std::vector<BandwidthRow> bandwidth_sweep(Communicator& comm, const std::vector<std::size_t>& sizes,
                                          int iterations, std::span<float> buffer = {});

// The rows as a table like nccl-tests prints:
//        size    count  iters   time(us)  algbw(GB/s)  busbw(GB/s)
std::string format_bandwidth_table(const std::vector<BandwidthRow>& rows);

}  // namespace ddp::comm
