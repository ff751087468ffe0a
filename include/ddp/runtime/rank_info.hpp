#pragma once
// Who every rank is: node-local placement from host names, and the rank table rank 0 prints at
// start (and `doctor` shows) so a user sees at a glance where each rank runs and on which CPUs.
#include <string>
#include <vector>

#include "ddp/runtime/gather.hpp"

namespace ddp::runtime {

class Runtime;

struct RankInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on the same host
  std::string host;
  int pid = 0;
  int threads = 0;            // compute threads this rank uses
  std::string device;         // "cpu", "cuda:0", ...
  std::string affinity;       // CPUs this process may run on, e.g. "0-1" or "0,2,4-7"
  int cpus = 0;               // how many CPUs that is
  int threads_requested = 0;  // runtime.threads as given; 0: chosen from the CPUs
  // The host's CPUs this job may use (cpu_binding.hpp): what a rank bound to fewer is missing.
  int node_cpus = 0, node_cores = 0;
  std::string node_cpus_source;  // where node_cpus comes from ("online CPUs", ...)
};

struct LocalPlacement {
  int local_rank = 0;  // position among the ranks on the same host, in rank order
  int local_size = 1;  // ranks on that host
  int node = 0;        // index of the host, in order of first appearance
};

// Placement of every rank given every rank's host name (index = rank). Names are compared by a hash
// first and in full when the hashes match, so two hosts never merge on a collision. This is what
// llm.c and nccl-tests do; MPI_Comm_split_type(SHARED) alone may split a node per NUMA domain.
std::vector<LocalPlacement> assign_local_ranks(const std::vector<std::string>& hosts);

// 64-bit FNV-1a of a host name (stable across processes and builds, unlike std::hash).
unsigned long long host_hash(const std::string& host);

// Compact CPU list in the kernel's format: {0,1,2,5,7,8} -> "0-2,5,7-8"; {} -> "".
std::string format_cpu_list(const std::vector<int>& cpus);
// The CPUs this process may run on (sched_getaffinity), as a list.
std::vector<int> affinity_cpus();

// This process's row of the table (local placement from the runtime, CPUs from the system; threads
// and device from the caller, which chose them; threads_requested: runtime.threads, 0 = automatic).
RankInfo describe_self(const Runtime& rt, int threads, const std::string& device,
                       long long threads_requested = 0);

class RecordWriter;
class RecordReader;
// A row as part of a gathered record (gather.hpp), for callers that send more than the row.
void write_rank_info(RecordWriter& w, const RankInfo& r);
RankInfo read_rank_info(RecordReader& in);

// Every rank's row, on every rank (collective over the `size` ranks `allgather` reaches, see
// gather.hpp). Index = rank.
std::vector<RankInfo> gather_rank_table(const RankInfo& mine, int size,
                                        const AllgatherBytes& allgather);
// The same over a communicator (comm::Communicator: under the job's timeout).
template <class Comm>
std::vector<RankInfo> gather_rank_table(const RankInfo& mine, Comm& comm) {
  return gather_rank_table(
      mine, comm.size(),
      [&comm](std::span<const std::byte> m, std::span<std::byte> a) { comm.allgather(m, a); });
}

// The table as aligned text, one header line and one line per rank:
//   rank  local  host    device  threads  cpus  pid
//      0   0/2   node01  cpu           1  0     4711
std::string format_rank_table(const std::vector<RankInfo>& table);

// The compute threads of the ranks for the start-up line: "2 thread(s) per rank" when every rank
// uses as many, else each rank's figure ("threads per rank 2/1/1"), or their range when the ranks
// are too many to list ("1-2 thread(s) per rank, see the rank table").
std::string describe_threads(const std::vector<RankInfo>& table);

}  // namespace ddp::runtime
