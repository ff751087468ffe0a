#pragma once
// Whether the ranks can use the CPUs their host gives the job. mpirun binds each rank to one core
// by default when it starts 2 or fewer ranks (to a socket or NUMA domain otherwise), so `mpirun -np
// 2` on two 32-core workstations trains with 1 thread per rank and nothing says so. We compare each
// rank's affinity with its share of the host's CPUs and name the fix.
//
// "The host's CPUs" is not the union of the local ranks' affinity masks: under the default binding
// that union is just the cores mpirun picked. It is what any process of the job may be moved to:
// the online CPUs, narrowed by the cgroup cpuset (a container, or Slurm's ConstrainCores) and,
// under Slurm, by SLURM_CPUS_ON_NODE (the job's allocation on the node, which is all that says so
// when Slurm does not confine the job with a cgroup). An affinity mask never narrows it: that is
// the binding being judged.
#include <optional>
#include <string>
#include <vector>

#include "ddp/runtime/rank_info.hpp"

namespace ddp::runtime {

struct NodeCpus {
  int cpus = 1;        // logical CPUs the job may use on this host
  int cores = 1;       // physical cores among them (`--map-by slot:PE=N` counts cores)
  std::string source;  // "online CPUs", "cgroup cpuset", "SLURM_CPUS_ON_NODE"
};

// The kernel's CPU list format ("0-3,8,10-11") as a sorted list; nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(const std::string& text);

// Pure: the host's CPUs given the online CPUs, the cgroup cpuset (nullopt: none found), the value
// of SLURM_CPUS_ON_NODE (nullopt: unset) and the physical core of each CPU (core_of[cpu]: a key
// shared by the hyperthreads of one core; CPUs without an entry count as cores of their own).
NodeCpus choose_node_cpus(const std::vector<int>& online,
                          const std::optional<std::vector<int>>& cgroup,
                          std::optional<long long> slurm_cpus_on_node,
                          const std::vector<std::string>& core_of);

// This host's, read from /sys (online CPUs, topology), /proc/self/cgroup with the cgroup v2 or v1
// cpuset, and the environment.
NodeCpus node_cpus();

// One warning per host on which some rank may use fewer CPUs than its share of the host's
// (node_cpus / ranks on the host), with the fix. A rank whose runtime.threads was set explicitly to
// no more than its CPUs is not counted: each of its threads has a CPU, so the binding costs it
// nothing (bench/rank_balance.sh pins ranks on purpose that way). Empty when all is well.
std::vector<std::string> check_binding(const std::vector<RankInfo>& table);

}  // namespace ddp::runtime
