#include "ddp/runtime/cpu_binding.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ddp::runtime {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<int> online_cpus() {
  if (const auto line = first_line("/sys/devices/system/cpu/online"))
    if (auto cpus = parse_cpu_list(*line); cpus && !cpus->empty()) return *cpus;
  std::vector<int> cpus;
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < std::max(1L, n); ++c) cpus.push_back(c);
  return cpus;
}

// The cpuset of the cgroup this process is in: cgroup v1's cpuset hierarchy when it is mounted,
// else cgroup v2's. A container may not see the path /proc/self/cgroup names (it is the host's),
// so the lookup walks up to the mount point, whose cpuset is then the container's own.
std::optional<std::vector<int>> cgroup_cpus() {
  std::ifstream in("/proc/self/cgroup");
  std::optional<fs::path> v1, v2;
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = ",";
    controllers.append(line, a + 1, b - a - 1).append(",");
    const fs::path path = fs::path(line.substr(b + 1)).relative_path();
    if (controllers.find(",cpuset,") != std::string::npos) v1 = path;
    if (line.compare(0, a, "0") == 0 && b == a + 1) v2 = path;
  }
  auto lookup = [](const fs::path& mount, fs::path path,
                   std::initializer_list<const char*> names) -> std::optional<std::vector<int>> {
    for (;; path = path.parent_path()) {
      for (const char* name : names)
        if (const auto line = first_line(mount / path / name))
          if (auto cpus = parse_cpu_list(*line); cpus && !cpus->empty()) return cpus;
      if (path.empty()) return std::nullopt;
    }
  };
  if (v1)
    if (auto cpus = lookup("/sys/fs/cgroup/cpuset", *v1, {"cpuset.effective_cpus", "cpuset.cpus"}))
      return cpus;
  if (v2) return lookup("/sys/fs/cgroup", *v2, {"cpuset.cpus.effective"});
  return std::nullopt;
}

// For each CPU, the list of its hyperthread siblings: one key per physical core.
std::vector<std::string> core_keys(const std::vector<int>& cpus) {
  std::vector<std::string> keys;
  for (int c : cpus) {
    const fs::path topo = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology";
    auto key = first_line(topo / "core_cpus_list");
    if (!key) key = first_line(topo / "thread_siblings_list");
    if (keys.size() <= static_cast<std::size_t>(c)) keys.resize(static_cast<std::size_t>(c) + 1);
    keys[static_cast<std::size_t>(c)] = key.value_or("");
  }
  return keys;
}

// "rank 3", "ranks 0-2, 5".
std::string rank_list(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_cpu_list(ranks);
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::string_view s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return out;
  while (true) {
    const auto comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    const auto dash = item.find('-');
    const auto lo = to_int(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : to_int(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi - *lo > 1 << 20) return std::nullopt;
    for (int c = *lo; c <= *hi; ++c) out.push_back(c);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

NodeCpus choose_node_cpus(const std::vector<int>& online,
                          const std::optional<std::vector<int>>& cgroup,
                          std::optional<long long> slurm_cpus_on_node,
                          const std::vector<std::string>& core_of) {
  std::vector<int> set = online;
  NodeCpus n;
  n.source = "online CPUs";
  if (cgroup) {
    std::vector<int> both;
    std::set_intersection(online.begin(), online.end(), cgroup->begin(), cgroup->end(),
                          std::back_inserter(both));
    if (!both.empty() && both.size() < set.size()) {
      set = std::move(both);
      n.source = "cgroup cpuset";
    }
  }
  std::set<std::string> cores;
  for (int c : set) {
    const auto i = static_cast<std::size_t>(c);
    cores.insert(i < core_of.size() && !core_of[i].empty() ? core_of[i]
                                                           : "cpu" + std::to_string(c));
  }
  n.cpus = std::max<int>(1, static_cast<int>(set.size()));
  n.cores = std::max<int>(1, static_cast<int>(cores.size()));
  if (slurm_cpus_on_node && *slurm_cpus_on_node > 0 && *slurm_cpus_on_node < n.cpus) {
    // Only a count: assume the allocation has the host's mix of cores and hyperthreads.
    const int slurm = static_cast<int>(*slurm_cpus_on_node);
    n.cores = std::max(1, static_cast<int>(static_cast<long long>(slurm) * n.cores / n.cpus));
    n.cpus = slurm;
    n.source = "SLURM_CPUS_ON_NODE";
  }
  return n;
}

NodeCpus node_cpus() {
  const auto online = online_cpus();
  std::optional<long long> slurm;
  if (const char* v = std::getenv("SLURM_CPUS_ON_NODE"))
    if (const auto i = to_int(v)) slurm = *i;
  return choose_node_cpus(online, cgroup_cpus(), slurm, core_keys(online));
}

std::vector<std::string> check_binding(const std::vector<RankInfo>& table) {
  std::map<std::string, std::vector<const RankInfo*>> by_host;
  std::vector<std::string> hosts;  // in order of first appearance
  for (const auto& r : table) {
    auto& ranks = by_host[r.host];
    if (ranks.empty()) hosts.push_back(r.host);
    ranks.push_back(&r);
  }
  std::vector<std::string> out;
  for (const auto& host : hosts) {
    const auto& ranks = by_host[host];
    const int local = static_cast<int>(ranks.size());
    // The ranks of a host see the same figures unless their cgroups differ: take the largest.
    const RankInfo* widest = *std::max_element(
        ranks.begin(), ranks.end(),
        [](const RankInfo* a, const RankInfo* b) { return a->node_cpus < b->node_cpus; });
    if (widest->node_cpus <= 0) continue;  // a row from a rank that could not tell
    const int share = std::max(1, widest->node_cpus / local);
    const int cores_share = std::max(1, widest->node_cores / local);
    std::vector<int> short_ranks;
    std::vector<std::string> lists;
    int least = share;
    for (const auto* r : ranks) {
      if (r->cpus <= 0 || r->cpus >= share) continue;
      if (r->threads_requested > 0 && r->threads_requested <= r->cpus) continue;
      short_ranks.push_back(r->rank);
      lists.push_back(r->affinity);
      least = std::min(least, r->cpus);
    }
    if (short_ranks.empty()) continue;
    std::ostringstream m;
    const bool one = short_ranks.size() == 1;
    m << "host " << (host.empty() ? "?" : host) << ": " << rank_list(short_ranks)
      << (one ? " is" : " are") << " bound to " << (one ? "" : "as few as ") << least << " CPU(s)";
    if (lists.size() <= 4) {
      m << " (cpus ";
      for (std::size_t i = 0; i < lists.size(); ++i) m << (i ? "; " : "") << lists[i];
      m << ")";
    }
    m << " but could use " << share << (one ? "" : " each") << ": the host gives this job "
      << widest->node_cpus << " CPU(s) (" << widest->node_cpus_source << ") for " << local
      << " rank(s). mpirun binds each rank to one core by default when it starts 2 or fewer "
         "ranks (to a socket or NUMA domain otherwise). Fix: `mpirun --bind-to none ...` or "
         "`mpirun --map-by slot:PE="
      << cores_share << " ...` (cores per rank); under Slurm `srun --cpus-per-task=" << share
      << " ...`.";
    out.push_back(m.str());
  }
  return out;
}

}  // namespace ddp::runtime
