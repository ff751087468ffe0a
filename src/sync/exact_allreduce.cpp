#include "ddp/sync/exact_allreduce.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/sync/fixed_point_sum.hpp"

namespace ddp::sync {

std::optional<std::int64_t> exact_allreduce(comm::Communicator& comm,
                                            std::span<const std::span<const double>> parts,
                                            std::span<const std::int64_t> chunk_ids,
                                            std::int64_t terms, std::span<double> out) {
  if (parts.size() != chunk_ids.size() || std::ssize(parts) > terms)
    throw Error("internal: an exact all-reduce of " + std::to_string(parts.size()) +
                " parts with " + std::to_string(chunk_ids.size()) + " chunk numbers of " +
                std::to_string(terms));
  const std::size_t n = out.size();
  for (const auto& p : parts)
    if (p.size() != n)
      throw Error("internal: an exact all-reduce part of " + std::to_string(p.size()) +
                  " values for " + std::to_string(n));
  std::vector<std::int64_t> codes(n, fixed::kAllZero);
  for (std::size_t p = 0; p < parts.size(); ++p)
    for (std::size_t i = 0; i < n; ++i) {
      const auto one = parts[p].subspan(i, 1);
      std::int64_t c = fixed::magnitude_code(one);
      if (fixed::is_nonfinite(c)) c = fixed::nonfinite_code_of(one, chunk_ids[p]);
      codes[i] = std::max(codes[i], c);
    }
  const bool communicates = comm.size() > 1;
  if (communicates) {
    comm::Request r = comm.iallreduce_max_int64(codes);
    comm.wait(r);
  }
  std::vector<std::int64_t> acc(n, 0);
  std::vector<int> shift(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (fixed::is_nonfinite(codes[i])) continue;
    shift[i] = fixed::shift_for(codes[i], terms);
    for (const auto& p : parts)
      fixed::add_fixed(p.subspan(i, 1), shift[i], std::span(acc).subspan(i, 1));
  }
  if (communicates) {
    comm::Request r = comm.iallreduce_sum_int64(acc);
    comm.wait(r);
  }
  std::optional<std::int64_t> bad;
  for (std::size_t i = 0; i < n; ++i) {
    if (fixed::is_nonfinite(codes[i])) {
      out[i] = std::numeric_limits<double>::quiet_NaN();
      if (!bad) bad = codes[i];
      continue;
    }
    fixed::from_fixed(std::span<const std::int64_t>(acc).subspan(i, 1), shift[i],
                      out.subspan(i, 1));
  }
  return bad;
}

}  // namespace ddp::sync
