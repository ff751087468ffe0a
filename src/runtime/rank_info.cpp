#include "ddp/runtime/rank_info.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "ddp/error.hpp"
#include "ddp/runtime/cpu_binding.hpp"
#include "ddp/runtime/gather.hpp"
#include "ddp/runtime/runtime.hpp"

namespace ddp::runtime {
unsigned long long host_hash(const std::string& host) {
  unsigned long long h = 14695981039346656037ull;
  for (unsigned char c : host) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<LocalPlacement> assign_local_ranks(const std::vector<std::string>& hosts) {
  std::vector<LocalPlacement> out(hosts.size());
  std::vector<int> node_size;                                        // ranks per node so far
  std::unordered_map<unsigned long long, std::vector<int>> by_hash;  // hash -> nodes with it
  std::vector<std::size_t> node_first_rank;                          // a rank on each node
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    auto& candidates = by_hash[host_hash(hosts[r])];
    int node = -1;
    for (int n : candidates)
      if (hosts[node_first_rank[static_cast<std::size_t>(n)]] == hosts[r]) node = n;
    if (node < 0) {
      node = static_cast<int>(node_size.size());
      node_size.push_back(0);
      node_first_rank.push_back(r);
      candidates.push_back(node);
    }
    out[r].node = node;
    out[r].local_rank = node_size[static_cast<std::size_t>(node)]++;
  }
  for (auto& p : out) p.local_size = node_size[static_cast<std::size_t>(p.node)];
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> v = cpus;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

RankInfo describe_self(const Runtime& rt, int threads, const std::string& device,
                       long long threads_requested) {
  RankInfo r;
  r.rank = rt.rank();
  r.size = rt.size();
  r.local_rank = rt.local_rank();
  r.local_size = rt.local_size();
  r.host = rt.host();
  r.pid = static_cast<int>(getpid());
  r.threads = threads;
  r.device = device;
  const auto cpus = affinity_cpus();
  r.affinity = format_cpu_list(cpus);
  r.cpus = static_cast<int>(cpus.size());
  r.threads_requested = static_cast<int>(std::clamp<long long>(threads_requested, 0, 1 << 30));
  const NodeCpus node = node_cpus();
  r.node_cpus = node.cpus;
  r.node_cores = node.cores;
  r.node_cpus_source = node.source;
  return r;
}

void write_rank_info(RecordWriter& w, const RankInfo& r) {
  for (int v : {r.rank, r.size, r.local_rank, r.local_size, r.pid, r.threads, r.cpus,
                r.threads_requested, r.node_cpus, r.node_cores})
    w.put(std::int64_t{v});
  w.put(r.host).put(r.device).put(r.affinity).put(r.node_cpus_source);
}

RankInfo read_rank_info(RecordReader& in) {
  RankInfo r;
  for (int* v : {&r.rank, &r.size, &r.local_rank, &r.local_size, &r.pid, &r.threads, &r.cpus,
                 &r.threads_requested, &r.node_cpus, &r.node_cores})
    *v = static_cast<int>(in.get_int());
  r.host = in.get_str();
  r.device = in.get_str();
  r.affinity = in.get_str();
  r.node_cpus_source = in.get_str();
  return r;
}

std::vector<RankInfo> gather_rank_table(const RankInfo& mine, int size,
                                        const AllgatherBytes& allgather) {
  RecordWriter w;
  write_rank_info(w, mine);
  std::vector<RankInfo> table;
  for (const auto& record : allgather_strings(w.bytes(), size, allgather)) {
    RecordReader in(record);
    table.push_back(read_rank_info(in));
  }
  return table;
}

std::string format_rank_table(const std::vector<RankInfo>& table) {
  struct Column {
    const char* title;
    bool right;  // numbers right-aligned, names left-aligned
    std::vector<std::string> cells;
  };
  std::vector<Column> cols = {{"rank", true, {}},    {"local", true, {}},   {"host", false, {}},
                              {"device", false, {}}, {"threads", true, {}}, {"cpus", false, {}},
                              {"pid", true, {}}};
  for (const auto& r : table) {
    cols[0].cells.push_back(std::to_string(r.rank));
    cols[1].cells.push_back(std::to_string(r.local_rank) + "/" + std::to_string(r.local_size));
    cols[2].cells.push_back(r.host.empty() ? "?" : r.host);
    cols[3].cells.push_back(r.device.empty() ? "?" : r.device);
    cols[4].cells.push_back(std::to_string(r.threads));
    cols[5].cells.push_back(r.affinity.empty() ? "?" : r.affinity);
    cols[6].cells.push_back(std::to_string(r.pid));
  }
  std::vector<std::size_t> width;
  for (const auto& c : cols) {
    std::size_t w = std::strlen(c.title);
    for (const auto& s : c.cells) w = std::max(w, s.size());
    width.push_back(w);
  }
  std::ostringstream out;
  auto cell = [&](std::size_t c, const std::string& s, bool last) {
    const std::string pad(width[c] - s.size(), ' ');
    if (cols[c].right) {
      out << pad << s;
    } else {
      out << s;
      if (!last) out << pad;  // no trailing blanks at the end of a line
    }
    if (!last) out << "  ";
  };
  for (std::size_t c = 0; c < cols.size(); ++c) cell(c, cols[c].title, c + 1 == cols.size());
  out << '\n';
  for (std::size_t r = 0; r < table.size(); ++r) {
    for (std::size_t c = 0; c < cols.size(); ++c) cell(c, cols[c].cells[r], c + 1 == cols.size());
    out << '\n';
  }
  return out.str();
}

std::string describe_threads(const std::vector<RankInfo>& table) {
  if (table.empty()) return "? thread(s) per rank";
  const auto [lo, hi] = std::minmax_element(
      table.begin(), table.end(),
      [](const RankInfo& a, const RankInfo& b) { return a.threads < b.threads; });
  if (lo->threads == hi->threads) return std::to_string(lo->threads) + " thread(s) per rank";
  if (table.size() > 8)
    return std::to_string(lo->threads) + "-" + std::to_string(hi->threads) +
           " thread(s) per rank, see the rank table";
  std::string out = "threads per rank ";
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (i) out += '/';
    out += std::to_string(table[i].threads);
  }
  return out;
}

}  // namespace ddp::runtime
