#pragma once
// The exact sum (fixed_point_sum.hpp) of a few values over the chunks of every rank, each value
// with a scale of its own: what reproducible mode sums besides the gradients (sync batch norm's
// per-channel sums, the chunks' running statistics, the loss). Blocking and collective: an
// all-reduce MAX of the magnitude codes and an all-reduce of the integers (none on one rank).
#include <cstdint>
#include <optional>
#include <span>

#include "ddp/comm/communicator.hpp"

namespace ddp::sync {

// out[i] = the sum over every rank's parts of parts[p][i] (every part out.size() values; a rank
// may pass none), chunk_ids[p] the number of part p among the `terms` parts of all ranks (terms
// <= fixed::kMaxTerms). out may be one of the parts. An element some part held as NaN or inf
// comes out NaN, and the first such element's non-finite code is returned (fixed::nonfinite_*
// read it: the chunk, NaN or inf); nullopt when all were finite.
std::optional<std::int64_t> exact_allreduce(comm::Communicator& comm,
                                            std::span<const std::span<const double>> parts,
                                            std::span<const std::int64_t> chunk_ids,
                                            std::int64_t terms, std::span<double> out);

}  // namespace ddp::sync
