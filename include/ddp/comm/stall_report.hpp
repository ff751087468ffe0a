#pragma once
// What a rank prints when a collective does not complete in time (the "stall inspector" of
// Horovod): which collective, how large, how long we waited, and which ranks never arrived. Pure
// functions, so the wording is unit-tested without MPI.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddp::comm {

// One collective as the stall report names it.
struct CollectiveInfo {
  std::int64_t seq = 0;   // 1-based index over the communicator's collectives
  std::string kind;       // "allreduce", "broadcast from rank 0", "barrier", ...
  std::size_t bytes = 0;  // payload per rank (0: not shown)
};

// "512 B", "248 KiB", "1.5 MiB", "2.0 GiB".
std::string format_bytes(std::size_t bytes);

// Ranks whose last announced collective is before `seq` (arrived[r] = highest collective index
// rank r has started), in rank order.
std::vector<int> missing_ranks(std::span<const std::int64_t> arrived, std::int64_t seq);

// "1", "1, 3", "0-2, 5" (runs of 3 or more contiguous ranks are shortened).
std::string format_rank_list(const std::vector<int>& ranks);

// The report line (without the "ddp_train: error (rank R of N): " prefix main's errors share):
//   collective #K (allreduce, 248 KiB) did not complete within 5 s; ranks not arrived: 2
// `missing_known` false: the set could not be determined; `note` explains (appended in
// parentheses).
std::string describe_stall(const CollectiveInfo& c, double timeout_s,
                           const std::vector<int>& missing, bool missing_known,
                           const std::string& note = {});

}  // namespace ddp::comm
