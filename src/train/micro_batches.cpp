#include "ddp/train/micro_batches.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ddp/error.hpp"

namespace ddp::train {

std::int64_t micro_batch_count(std::int64_t n, std::int64_t cap, std::int64_t accumulate) {
  if (n < 0 || cap < 0 || accumulate < 1)
    throw Error("internal: micro_batch_count(" + std::to_string(n) + ", " + std::to_string(cap) +
                ", " + std::to_string(accumulate) + ")");
  const std::int64_t by_cap = cap > 0 ? (n + cap - 1) / cap : 1;
  return std::max(accumulate, by_cap);
}

std::pair<std::int64_t, std::int64_t> MicroBatchPlan::range(std::int64_t m) const {
  if (m >= real) return {samples, samples};
  return {m * samples / real, (m + 1) * samples / real};
}

std::int64_t MicroBatchPlan::largest() const {
  return (samples + real - 1) / real;
}

MicroBatchPlan plan_micro_batches(std::span<const std::int64_t> slices,
                                  std::span<const std::int64_t> caps, std::int64_t accumulate,
                                  int rank, bool same_count) {
  const auto r = static_cast<std::size_t>(rank);
  if (rank < 0 || r >= slices.size() || caps.size() != slices.size())
    throw Error("internal: plan_micro_batches for rank " + std::to_string(rank) + " of " +
                std::to_string(slices.size()) + " slices and " + std::to_string(caps.size()) +
                " caps");
  MicroBatchPlan p;
  p.samples = slices[r];
  p.real = micro_batch_count(p.samples, caps[r], accumulate);
  p.total = p.real;
  if (same_count)
    for (std::size_t q = 0; q < slices.size(); ++q)
      p.total = std::max(p.total, micro_batch_count(slices[q], caps[q], accumulate));
  return p;
}

std::int64_t micro_batch_cap_for_memory(double free_bytes, double fixed_bytes,
                                        double sample_bytes) {
  if (sample_bytes <= 0) return 0;
  const double usable = 0.8 * free_bytes - fixed_bytes;
  if (usable < sample_bytes) return 0;
  return static_cast<std::int64_t>(std::min(std::floor(usable / sample_bytes), 1e15));
}

}  // namespace ddp::train
