#include "ddp/comm/collective_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace ddp::comm {
namespace {

// Counts the elements of `got` that differ from expected(i); describes the first.
template <class T, class F>
std::string compare(const char* what, const std::vector<T>& got, F expected) {
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected(i)) {
      if (wrong++ == 0) first = i;
    }
  }
  if (wrong == 0) return "";
  std::ostringstream out;
  out << what << ": " << wrong << " of " << got.size() << " elements wrong, first at " << first
      << ": got " << got[first] << ", expected " << expected(first);
  return out.str();
}

void add(std::string& problems, const std::string& p) {
  if (p.empty()) return;
  if (!problems.empty()) problems += "; ";
  problems += p;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The largest of every rank's value (collective).
double max_over_ranks(Communicator& comm, double mine) {
  std::vector<double> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::as_bytes(std::span<const double>(&mine, 1)),
                 std::as_writable_bytes(std::span<double>(all)));
  return *std::max_element(all.begin(), all.end());
}

}  // namespace

std::string verify_collectives(Communicator& comm) {
  const auto n = static_cast<std::int64_t>(comm.size());
  const auto r = static_cast<std::int64_t>(comm.rank());
  const std::int64_t tri = n * (n + 1) / 2;  // sum of (rank + 1) over the ranks
  std::string problems;

  {  // Small integers are exact in float whatever the order of summation.
    std::vector<float> v(1000003);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(r + 1 + std::int64_t(i % 5));
    comm.allreduce_sum(std::span<float>(v));
    add(problems, compare("allreduce float", v, [&](std::size_t i) {
          return static_cast<float>(tri + n * std::int64_t(i % 5));
        }));
  }
  {
    std::vector<double> v(4099);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * double(r + 1) + double(i);
    comm.allreduce_sum(std::span<double>(v));
    add(problems, compare("allreduce double", v, [&](std::size_t i) {
          return 0.5 * double(tri) + double(n) * double(i);
        }));
  }
  {  // Values beyond 2^32: a transport that truncates to 32 bits shows.
    const std::int64_t big = std::int64_t{1} << 40;
    std::vector<std::int64_t> v(1027);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = big * (r + 1) + std::int64_t(i);
    comm.allreduce_sum(std::span<std::int64_t>(v));
    add(problems, compare("allreduce int64", v,
                          [&](std::size_t i) { return big * tri + n * std::int64_t(i); }));
  }
  {  // Buckets in flight together, completed out of order, as gradient synchronisation does.
    const std::size_t sizes[] = {1, 257, 65537, 3};
    std::vector<std::vector<float>> buckets;
    std::vector<Request> reqs;
    for (std::size_t b = 0; b < std::size(sizes); ++b)
      buckets.emplace_back(sizes[b], static_cast<float>(r + 1 + std::int64_t(b)));
    for (auto& bucket : buckets) reqs.push_back(comm.iallreduce_sum(std::span<float>(bucket)));
    while (!comm.test(reqs.back())) {
    }
    for (auto& q : reqs) comm.wait(q);
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const std::string what = "non-blocking allreduce (bucket " + std::to_string(b) + ")";
      add(problems, compare(what.c_str(), buckets[b], [&](std::size_t) {
            return static_cast<float>(tri + n * std::int64_t(b));
          }));
    }
  }
  {
    const int root = comm.size() - 1;
    std::vector<unsigned char> v(1001, 0);
    auto pattern = [](std::size_t i) { return static_cast<unsigned char>((i * 7 + 3) & 0xff); };
    if (comm.rank() == root)
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(i);
    comm.broadcast(std::as_writable_bytes(std::span<unsigned char>(v)), root);
    std::vector<int> as_int(v.begin(), v.end());
    add(problems, compare(("broadcast from rank " + std::to_string(root)).c_str(), as_int,
                          [&](std::size_t i) { return int(pattern(i)); }));
  }
  {
    const std::int64_t mine = r * 1000 + 7;
    std::vector<std::int64_t> all(static_cast<std::size_t>(n), -1);
    comm.allgather(std::as_bytes(std::span<const std::int64_t>(&mine, 1)),
                   std::as_writable_bytes(std::span<std::int64_t>(all)));
    add(problems,
        compare("allgather", all, [](std::size_t i) { return std::int64_t(i) * 1000 + 7; }));
  }
  return problems;
}

double allreduce_busbw(double algbw, int ranks) {
  if (ranks <= 1) return 0.0;
  return algbw * 2.0 * double(ranks - 1) / double(ranks);
}

std::vector<std::size_t> sweep_sizes(std::size_t min_bytes, std::size_t max_bytes, int factor) {
  std::vector<std::size_t> out;
  const std::size_t step = static_cast<std::size_t>(std::max(2, factor));
  for (std::size_t b = std::max<std::size_t>(min_bytes, sizeof(float)); b <= max_bytes; b *= step) {
    out.push_back(b / sizeof(float) * sizeof(float));
    if (b > max_bytes / step) break;
  }
  return out;
}

std::vector<BandwidthRow> bandwidth_sweep(Communicator& comm, const std::vector<std::size_t>& sizes,
                                          int iterations, std::span<float> buffer) {
  std::vector<BandwidthRow> rows;
  std::vector<float> host;
  for (const std::size_t bytes : sizes) {
    const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
    if (buffer.empty() && host.size() < count) host.assign(count, 0.0f);
    const std::span<float> pool = buffer.empty() ? std::span<float>(host) : buffer;
    const std::span<float> buf = pool.first(std::min(count, pool.size()));
    // Warm-up (connections, registration), which also sizes the timed loop: about a second at
    // most per size, the same count on every rank (the slowest rank's estimate).
    double t0 = now();
    for (int i = 0; i < 2; ++i) comm.allreduce_sum(buf);
    const double est = max_over_ranks(comm, (now() - t0) / 2.0);
    const double fit = est > 0 ? 1.0 / est : double(iterations);
    const int iters = static_cast<int>(std::clamp(fit, 1.0, double(std::max(1, iterations))));
    comm.barrier();
    t0 = now();
    for (int i = 0; i < iters; ++i) comm.allreduce_sum(buf);
    const double seconds = max_over_ranks(comm, (now() - t0) / iters);
    BandwidthRow row;
    row.bytes = buf.size() * sizeof(float);
    row.iterations = iters;
    row.seconds = seconds;
    row.algbw = seconds > 0 ? double(row.bytes) / seconds / 1e9 : 0.0;
    row.busbw = allreduce_busbw(row.algbw, comm.size());
    rows.push_back(row);
  }
  return rows;
}

std::string format_bandwidth_table(const std::vector<BandwidthRow>& rows) {
  std::string out = "        size       count  iters     time(us)  algbw(GB/s)  busbw(GB/s)\n";
  for (const auto& r : rows) {
    char line[128];
    std::snprintf(line, sizeof line, "%12zu  %10zu  %5d  %11.2f  %11.4f  %11.4f\n", r.bytes,
                  r.bytes / sizeof(float), r.iterations, r.seconds * 1e6, r.algbw, r.busbw);
    out += line;
  }
  return out;
}

}  // namespace ddp::comm
