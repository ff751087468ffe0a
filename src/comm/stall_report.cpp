#include "ddp/comm/stall_report.hpp"

#include <cstdio>

namespace ddp::comm {

std::string format_bytes(std::size_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  // Whole units from 10 up (248 KiB); one decimal below (1.5 MiB), where it carries information.
  std::snprintf(buf, sizeof buf, v >= 10.0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::vector<int> missing_ranks(std::span<const std::int64_t> arrived, std::int64_t seq) {
  std::vector<int> out;
  for (std::size_t r = 0; r < arrived.size(); ++r)
    if (arrived[r] < seq) out.push_back(static_cast<int>(r));
  return out;
}

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j >= i + 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      out += std::to_string(ranks[i]);
      if (j > i) out += ", " + std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string describe_stall(const CollectiveInfo& c, double timeout_s,
                           const std::vector<int>& missing, bool missing_known,
                           const std::string& note) {
  char t[32];
  std::snprintf(t, sizeof t, "%g", timeout_s);
  std::string m = "collective #" + std::to_string(c.seq) + " (" + c.kind;
  if (c.bytes > 0) m += ", " + format_bytes(c.bytes);
  m += ") did not complete within " + std::string(t) + " s; ";
  if (missing_known && !missing.empty()) {
    m += "ranks not arrived: " + format_rank_list(missing);
  } else if (missing_known) {
    // Everyone announced the collective yet it did not finish: the network, not a rank, is stuck.
    m += "ranks not arrived: none (every rank started it; the communication itself is stuck)";
  } else if (!missing.empty()) {
    m += "ranks not arrived: " + format_rank_list(missing) + " at least";
  } else {
    m += "ranks not arrived: could not be determined";
  }
  if (!note.empty()) m += " (" + note + ")";
  return m;
}

}  // namespace ddp::comm
